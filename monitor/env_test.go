package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/revisions"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// env is one node's files, a fake clock and a fake operand admin endpoint.
type env struct {
	t     *testing.T
	l     revisions.Layout
	fs    revisions.FS
	clock *clocktesting.FakeClock
	op    *operand
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	l := revisions.Layout{
		Target:         "revgate",
		ResourceDir:    filepath.Join(root, "resources"),
		ManifestsDir:   filepath.Join(root, "manifests"),
		LockFile:       filepath.Join(root, "lock", "revgate-installer.lock"),
		TerminationLog: filepath.Join(root, "log", "termination.log"),
	}
	for _, d := range []string{l.ResourceDir, l.ManifestsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	op := &operand{health: 200, ready: 200}
	srv := httptest.NewServer(op)
	t.Cleanup(srv.Close)
	op.url = srv.URL
	return &env{t: t, l: l, fs: revisions.OS(), clock: clocktesting.NewFakeClock(t0), op: op}
}

// operand answers /healthz and /readyz like revgate proxy does.
type operand struct {
	mu     sync.Mutex
	url    string
	revs   []int // answering revisions, used round-robin
	next   int
	health int
	ready  int
	body   string
}

func (o *operand) set(fn func(o *operand)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fn(o)
}

func (o *operand) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	rev := 0
	if len(o.revs) > 0 {
		rev = o.revs[o.next%len(o.revs)]
		o.next++
	}
	health, ready, body := o.health, o.ready, o.body
	o.mu.Unlock()
	if rev > 0 {
		w.Header().Set(revisions.HeaderRevision, strconv.Itoa(rev))
		w.Header().Set(revisions.HeaderPID, strconv.Itoa(1000+rev))
	}
	switch r.URL.Path {
	case "/healthz":
		w.WriteHeader(health)
		fmt.Fprintln(w, "ok")
	case "/readyz":
		if _, ok := r.URL.Query()["verbose"]; !ok {
			http.Error(w, "want ?verbose", 400)
			return
		}
		w.WriteHeader(ready)
		if body == "" {
			body = "[+]ping ok\nreadyz check passed\n"
		}
		fmt.Fprint(w, body)
	default:
		http.NotFound(w, r)
	}
}

func podManifest(name string, rev int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: kube-system
  labels:
    app: revgate
    revision: "%d"
spec:
  hostNetwork: true
  containers:
  - name: proxy
    image: revgate:dev
    command: ["revgate", "proxy", "--revision-dir=/etc/kubernetes/static-pod-resources/revgate-pod-%d"]
`, name, rev, rev)
}

// install writes revision n's folder.
func (e *env) install(n int) {
	e.t.Helper()
	if err := os.MkdirAll(e.l.RevisionDir(n), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.write(e.l.RevisionPodManifest(n), podManifest("revgate", n))
	e.write(e.l.RevisionMonitorManifest(n), podManifest("revgate-startup-monitor", n))
}

// publish puts revision n's manifests into the manifests dir, stamped with
// the fake time like a fresh file.
func (e *env) publish(n int, monitorToo bool) {
	e.t.Helper()
	e.copy(e.l.RevisionPodManifest(n), e.l.PublishedPodManifest())
	if monitorToo {
		e.copy(e.l.RevisionMonitorManifest(n), e.l.PublishedMonitorManifest())
	}
}

func (e *env) copy(from, to string) {
	e.t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		e.t.Fatal(err)
	}
	e.write(to, string(data))
}

func (e *env) write(p, data string) {
	e.t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chtimes(p, e.clock.Now(), e.clock.Now()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) setLKG(n int) {
	e.t.Helper()
	if err := e.l.SetLastKnownGood(e.fs, n); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) record(typ string, n int, msg string) {
	e.t.Helper()
	rec := revisions.TerminationRecord{Type: typ, Revision: n, PID: 100 + n, Error: msg}
	if typ == revisions.RecordExit {
		rec.ExitCode = 1
	}
	if err := revisions.AppendTerminationRecord(e.l.TerminationLog, e.clock, rec); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) options(n int) Options {
	return Options{
		Revision:     n,
		Layout:       e.l,
		FS:           &e.fs,
		HealthzURL:   e.op.url + "/healthz",
		ReadyzURL:    e.op.url + "/readyz",
		LockTimeout:  5 * time.Second,
		Clock:        e.clock,
		Logger:       slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RetryInitial: 10 * time.Minute,
		RetryMax:     time.Hour,
	}
}

func (e *env) monitor(n int, mod ...func(*Options)) *Monitor {
	e.t.Helper()
	o := e.options(n)
	for _, f := range mod {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// step runs one step and fails the test on an error.
func (e *env) step(m *Monitor) bool {
	e.t.Helper()
	done, err := m.Step(context.Background())
	if err != nil {
		e.t.Fatalf("step: %v", err)
	}
	return done
}

// stepFor steps every second of fake time for d, stopping when done.
func (e *env) stepFor(m *Monitor, d time.Duration) bool {
	e.t.Helper()
	end := e.clock.Now().Add(d)
	for {
		if e.step(m) {
			return true
		}
		if !e.clock.Now().Before(end) {
			return false
		}
		e.clock.Step(time.Second)
	}
}

func (e *env) published() (int, *fallbackstatus.Fallback, []byte) {
	e.t.Helper()
	data, err := os.ReadFile(e.l.PublishedPodManifest())
	if err != nil {
		e.t.Fatal(err)
	}
	rev, err := revisions.RevisionLabelOf(data, "published")
	if err != nil {
		e.t.Fatal(err)
	}
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yamlUnmarshal(data, &meta); err != nil {
		e.t.Fatal(err)
	}
	fb, err := fallbackstatus.Parse(meta.Metadata.Annotations)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev, fb, data
}

func (e *env) state(n int) *revisions.RevisionState {
	e.t.Helper()
	s, err := revisions.LoadState(e.fs, e.l.StateFile())
	if err != nil {
		e.t.Fatal(err)
	}
	return s.Revisions[n]
}

func (e *env) lkg() int {
	e.t.Helper()
	n, err := e.l.LastKnownGood(e.fs)
	if err != nil {
		return 0
	}
	return n
}

func (e *env) monitorManifestRevision() int {
	e.t.Helper()
	n, err := revisions.ReadRevisionLabel(e.fs, e.l.PublishedMonitorManifest())
	if err != nil {
		return 0
	}
	return n
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// autoStep moves the fake clock on by d whenever something waits on it,
// until the test ends: for waits inside a call the test cannot step between
// (Run's probe interval, the mirror-pod refresh).
func (e *env) autoStep(d time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	e.t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		for ctx.Err() == nil {
			if e.clock.HasWaiters() {
				e.clock.Step(d)
				continue
			}
			time.Sleep(time.Millisecond) // poll for the next waiter
		}
	}()
}

// waitForWaiter returns once something waits on the fake clock: a loop
// that reached its wait.
func (e *env) waitForWaiter() {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !e.clock.HasWaiters(); {
		if time.Now().After(deadline) {
			e.t.Fatal("nothing waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}
