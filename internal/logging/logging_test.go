package logging

import (
	"log/slog"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

type entry struct {
	msg  string
	pri  journal.Priority
	vars map[string]string
}

func TestJournalHandler(t *testing.T) {
	var got []entry
	send := func(msg string, pri journal.Priority, vars map[string]string) error {
		got = append(got, entry{msg, pri, vars})
		return nil
	}
	log := slog.New(NewJournalHandlerWith(send, nil)).With("component", "monitor", "target", "revgate")
	log.Debug("dropped")
	at := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	log.Warn("revision failed", "revision", 5, "reason", "CrashLooping", "next-retry", at, slog.Group("probe", "url", "http://x"))
	log.WithGroup("k8s").Error("event", "name", "revgate-node1")

	if len(got) != 2 {
		t.Fatalf("got %d entries, want 2 (debug dropped): %+v", len(got), got)
	}
	e := got[0]
	want := map[string]string{
		"COMPONENT": "monitor", "TARGET": "revgate", "REVISION": "5", "REASON": "CrashLooping",
		"NEXT_RETRY": "2026-11-22T01:00:00Z", "PROBE_URL": "http://x", "SLOG_LEVEL": "WARN",
	}
	if e.msg != "revision failed" || e.pri != journal.PriWarning {
		t.Fatalf("entry = %q %v", e.msg, e.pri)
	}
	for k, v := range want {
		if e.vars[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, e.vars[k], v, e.vars)
		}
	}
	if got[1].pri != journal.PriErr || got[1].vars["K8S_NAME"] != "revgate-node1" || got[1].vars["TARGET"] != "revgate" {
		t.Errorf("grouped entry = %+v", got[1])
	}
}

func TestFieldName(t *testing.T) {
	for in, want := range map[string]string{
		"revision": "REVISION", "fallback_to": "FALLBACK_TO", "a.b-c": "A_B_C", "_x": "X", "9lives": "F_9LIVES", "": "F_",
	} {
		if got := FieldName(in); got != want {
			t.Errorf("FieldName(%q) = %q, want %q", in, got, want)
		}
	}
}

// An attribute named like one of the entry's own fields must not overwrite it.
func TestJournalHandlerKeepsOwnFields(t *testing.T) {
	var vars map[string]string
	send := func(_ string, _ journal.Priority, v map[string]string) error { vars = v; return nil }
	slog.New(NewJournalHandlerWith(send, nil)).Info("real", "message", "kept apart", "syslog_identifier", "x", "pod", "a.yaml")
	if vars["ATTR_MESSAGE"] != "kept apart" || vars["ATTR_SYSLOG_IDENTIFIER"] != "x" {
		t.Errorf("attributes not kept apart: %v", vars)
	}
	if vars["SYSLOG_IDENTIFIER"] != Identifier || vars["POD"] != "a.yaml" {
		t.Errorf("entry fields = %v", vars)
	}
}

func TestNewForRefusesUnknownTarget(t *testing.T) {
	if _, err := NewFor("syslog", nil, slog.LevelInfo); err == nil {
		t.Fatal("unknown target accepted")
	}
	for _, target := range []string{TargetAuto, TargetStderr, TargetJournald} {
		if l, err := NewFor(target, nil, slog.LevelInfo); err != nil || l == nil {
			t.Errorf("%s: %v", target, err)
		}
	}
}
