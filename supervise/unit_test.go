package supervise

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/revgate/revgate/internal/doubling"
)

func TestIsManifestName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"revgate-pod.yaml", true},
		{"a.yml", true},
		{"a.JSON", true},
		{".revgate-pod.yaml.tmp", false},
		{".hidden.yaml", false},
		{"notes.txt", false},
		{"revgate-pod.yaml.bak", false},
		{"noext", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isManifestName(tt.name); got != tt.want {
				t.Errorf("isManifestName(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestParseManifest(t *testing.T) {
	good := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    command: [/bin/true]\n"
	tests := []struct {
		name    string
		data    string
		wantErr string
	}{
		{"valid", good, ""},
		{"valid json", `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","command":["x"]}]}}`, ""},
		{"not yaml", "{not yaml", "invalid pod manifest"},
		{"no containers", "apiVersion: v1\nkind: Pod\nspec: {}\n", "no containers"},
		{"no command", "kind: Pod\nspec:\n  containers:\n  - name: c\n    image: x\n", "has no command"},
		{"duplicate names", "kind: Pod\nspec:\n  containers:\n  - {name: c, command: [a]}\n  - {name: c, command: [b]}\n", "duplicate container name"},
		{"other kind", "kind: Deployment\nspec:\n  containers:\n  - {name: c, command: [a]}\n", "is not Pod"},
		{"bad restart policy", "kind: Pod\nspec:\n  restartPolicy: Sometimes\n  containers:\n  - {name: c, command: [a]}\n", "unknown restartPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parseManifest("f.yaml", []byte(tt.data))
			if tt.wantErr == "" {
				if m.err != nil || m.pod == nil || m.fingerprint == "" {
					t.Fatalf("parse = %+v, want a pod", m)
				}
				return
			}
			if m.err == nil || !errors.Is(m.err, ErrInvalidManifest) || !strings.Contains(m.err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrInvalidManifest mentioning %q", m.err, tt.wantErr)
			}
		})
	}

	t.Run("fingerprint follows metadata and spec, not formatting", func(t *testing.T) {
		a := parseManifest("f.yaml", []byte(good))
		b := parseManifest("f.yaml", []byte("# comment\n"+good))
		c := parseManifest("f.yaml", []byte(strings.Replace(good, "name: p", "name: p\n  annotations: {x: y}", 1)))
		if a.fingerprint != b.fingerprint {
			t.Errorf("a comment changed the fingerprint")
		}
		if a.fingerprint == c.fingerprint {
			t.Errorf("an annotation did not change the fingerprint")
		}
	})

	t.Run("with a uid, the fingerprint follows the uid and spec only", func(t *testing.T) {
		withUID := strings.Replace(good, "name: p", "name: p\n  uid: 6a1e0c52-3b8f-4d4e-9b61-2f0f7a5c9d10", 1)
		a := parseManifest("f.yaml", []byte(withUID))
		b := parseManifest("f.yaml", []byte(strings.Replace(withUID, "name: p", "name: p\n  annotations: {x: y}\n  labels: {l: v}", 1)))
		c := parseManifest("f.yaml", []byte(strings.Replace(withUID, "6a1e0c52", "7b2f1d63", 1)))
		if a.err != nil || a.fingerprint != b.fingerprint {
			t.Errorf("labels and annotations changed the fingerprint of a pod with a uid (%v)", a.err)
		}
		if a.fingerprint == c.fingerprint {
			t.Errorf("a new uid did not change the fingerprint")
		}
	})
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"PORT": "8080", "DIR": "/x"}
	tests := []struct{ in, want string }{
		{"--port=$(PORT)", "--port=8080"},
		{"$(DIR)/$(PORT)", "/x/8080"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$$(PORT)", "$(PORT)"},
		{"cost $5", "cost $5"},
		{"$(PORT", "$(PORT"},
		{"end$", "end$"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := expandVars(tt.in, vars); got != tt.want {
				t.Errorf("expandVars(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestProcNetSockets reads socket tables in the /proc format, IPv4 and
// IPv6 (addresses as 32-bit words in host byte order, ports in network
// order).
func TestProcNetSockets(t *testing.T) {
	root := t.TempDir()
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tables := map[string]string{
		"tcp": header +
			"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n" +
			"   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 67890 1 0000000000000000 20 4 30 10 -1\n",
		"tcp6": header +
			"   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0000000000000000 100 0 0 10 0\n",
	}
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range tables {
		if err := os.WriteFile(filepath.Join(root, "net", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := procFS{root: root}.sockets()
	if err != nil {
		t.Fatal(err)
	}
	want := []sockEntry{
		{local: netip.MustParseAddrPort("127.0.0.1:8080"), remote: netip.MustParseAddrPort("0.0.0.0:0"), state: tcpListen, inode: 12345},
		{local: netip.MustParseAddrPort("127.0.0.1:8080"), remote: netip.MustParseAddrPort("127.0.0.1:54321"), state: 1, inode: 67890},
		{local: netip.MustParseAddrPort("[::1]:80"), remote: netip.MustParseAddrPort("[::]:0"), state: tcpListen, inode: 555},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// captureHandler records log records with their attributes flattened.
type captureHandler struct {
	mu    *sync.Mutex
	attrs []slog.Attr
	recs  *[]map[string]string
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, m)
	h.mu.Unlock()
	return nil
}
func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return h
}
func (h captureHandler) WithGroup(string) slog.Handler { return h }

func TestContainerOutputIsLoggedWithPodAndContainer(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "out.yaml", helperPod(t, "out", map[string]string{"HELPER_ID": "out"}))
	var recs []map[string]string
	h := captureHandler{mu: &sync.Mutex{}, recs: &recs}
	opts := fastOptions(t, dir)
	opts.Logger = slog.New(h)
	r := startSupervisor(t, New(opts))
	find := func(msg string) map[string]string {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, rec := range recs {
			if rec["msg"] == msg {
				return rec
			}
		}
		return nil
	}
	waitFor(t, "both output lines", func() bool {
		return find("helper out started") != nil && find("helper out says hello on stderr") != nil
	})
	_ = r
	for msg, stream := range map[string]string{"helper out started": "stdout", "helper out says hello on stderr": "stderr"} {
		rec := find(msg)
		if rec["pod"] != "out.yaml" || rec["container"] != "main" || rec["stream"] != stream || rec["component"] != "supervise" {
			t.Errorf("record %v, want pod=out.yaml container=main stream=%s component=supervise", rec, stream)
		}
	}
}

func TestWatcherIsRestartedAfterAFailure(t *testing.T) {
	dir := t.TempDir()
	opts, clk := fakeOptions(t, dir)
	opts.RelistPeriod = time.Hour // only the watcher can notice the new file
	s := New(opts)
	var calls atomic.Int32
	s.newWatcher = func() (*fsnotify.Watcher, error) {
		if calls.Add(1) == 1 {
			return nil, syscall.EMFILE
		}
		return fsnotify.NewWatcher()
	}
	r := startSupervisor(t, s)
	waitPending(t, clk, watchRetryInitial, 1)
	if calls.Load() != 1 {
		t.Fatalf("%d watchers created before the retry delay passed", calls.Load())
	}
	clk.Step(watchRetryInitial)
	waitFor(t, "the watcher to be created again", func() bool { return calls.Load() >= 2 })
	time.Sleep(100 * time.Millisecond) // let it add the watch
	writeManifest(t, dir, "w.yaml", helperPod(t, "w", map[string]string{"HELPER_ID": "w"}))
	waitFor(t, "w.yaml started through the watcher", func() bool { return r.currentPID("w.yaml") != 0 })
}

// TestDoublingBackOff pins the restart delays the README states (10s
// doubling to 5m) and the watch retries (1s doubling to 30s): no jitter, no
// end, and Reset starts over.
func TestDoublingBackOff(t *testing.T) {
	s := time.Second
	tests := []struct {
		name         string
		initial, max time.Duration
		want         []time.Duration
	}{
		{name: "restarts", initial: DefaultBackoffInitial, max: DefaultBackoffMax,
			want: []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s, 300 * s}},
		{name: "watch retries", initial: watchRetryInitial, max: watchRetryMax,
			want: []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}},
		{name: "initial above max", initial: time.Minute, max: 30 * s,
			want: []time.Duration{time.Minute, 30 * s, 30 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := doubling.New(tt.initial, tt.max, newFakeClock())
			for round := range 2 {
				for i, want := range tt.want {
					if got := b.NextBackOff(); got != want {
						t.Fatalf("round %d, delay %d = %s, want %s", round, i, got, want)
					}
				}
				b.Reset()
			}
		})
	}
}
