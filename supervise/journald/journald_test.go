package journald

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
)

type entry struct {
	msg    string
	pri    journal.Priority
	fields map[string]string
}

func TestHandlerSendsUpperCaseFields(t *testing.T) {
	var got []entry
	h := New(Options{Identifier: "revgate-test", Send: func(m string, p journal.Priority, f map[string]string) error {
		got = append(got, entry{m, p, f})
		return nil
	}})
	log := slog.New(h).With("component", "supervise", "pod", "a.yaml")
	log.Info("container started", "container", "main", "pid", 42)
	log.WithGroup("probe").Warn("not ready", "http-status", 503, "err", errors.New("boom"))
	log.Debug("dropped")
	log.Error("bad", "message", "kept apart", "9lives", true)

	if len(got) != 3 {
		t.Fatalf("sent %d entries, want 3 (debug is below the default level)", len(got))
	}
	tests := []struct {
		name  string
		entry entry
		msg   string
		pri   journal.Priority
		want  map[string]string
	}{
		{"attrs and handler attrs", got[0], "container started", journal.PriInfo, map[string]string{
			"COMPONENT": "supervise", "POD": "a.yaml", "CONTAINER": "main", "PID": "42", "SYSLOG_IDENTIFIER": "revgate-test",
		}},
		{"group prefix and error values", got[1], "not ready", journal.PriWarning, map[string]string{
			"POD": "a.yaml", "PROBE_HTTP_STATUS": "503", "PROBE_ERR": "boom",
		}},
		{"reserved and odd names", got[2], "bad", journal.PriErr, map[string]string{
			"ATTR_MESSAGE": "kept apart", "F_9LIVES": "true",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.entry.msg != tt.msg || tt.entry.pri != tt.pri {
				t.Errorf("entry = %q priority %d, want %q priority %d", tt.entry.msg, tt.entry.pri, tt.msg, tt.pri)
			}
			for k, v := range tt.want {
				if tt.entry.fields[k] != v {
					t.Errorf("field %s = %q, want %q (all: %v)", k, tt.entry.fields[k], v, tt.entry.fields)
				}
			}
		})
	}
}
