package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/internal/clocktest"
)

// The test binary doubles as the "container": with SUPERVISE_HELPER=1 it runs
// helperMain instead of the tests. Its behaviour is set by HELPER_* variables:
//
//	HELPER_ID          name echoed by / and in the output
//	HELPER_STARTS      file to which "<id> <pid>" is appended at start
//	HELPER_EXIT        exit at once with this code
//	HELPER_CRASH_IF    exit 1 at once if this file exists, else write <file>.running
//	                   and exit 2 once the file appears
//	HELPER_PORT        serve HTTP on 127.0.0.1:<port> with SO_REUSEPORT
//	HELPER_READY_FILE  /ready answers 200 only while this file exists (else always 200)
//	HELPER_IGNORE_TERM ignore SIGTERM
func TestMain(m *testing.M) {
	switch os.Getenv("SUPERVISE_HELPER") {
	case "1":
		helperMain()
		return
	case "supervisor":
		supervisorMain()
		return
	}
	os.Exit(m.Run())
}

func helperMain() {
	id := os.Getenv("HELPER_ID")
	// Signals first: once a start is recorded, SIGTERM does what the test
	// asked for, even when a fake clock lets the supervisor stop the helper
	// at once.
	sigs := make(chan os.Signal, 1)
	if os.Getenv("HELPER_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM)
	}
	if f := os.Getenv("HELPER_STARTS"); f != "" {
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(fh, "%s %d\n", id, os.Getpid())
			fh.Close()
		}
	}
	fmt.Println("helper", id, "started")
	fmt.Fprintln(os.Stderr, "helper", id, "says hello on stderr")
	if c := os.Getenv("HELPER_EXIT"); c != "" {
		n, _ := strconv.Atoi(c)
		os.Exit(n)
	}
	if f := os.Getenv("HELPER_CRASH_IF"); f != "" {
		if _, err := os.Stat(f); err == nil {
			os.Exit(1)
		}
		// Tell the test that this start is past the check.
		_ = os.WriteFile(f+".running", []byte(strconv.Itoa(os.Getpid())), 0o644)
		go func() {
			for {
				if _, err := os.Stat(f); err == nil {
					os.Exit(2)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	var srv *http.Server
	var ln net.Listener
	if port := os.Getenv("HELPER_PORT"); port != "" {
		var err error
		ln, err = listenReusePort("127.0.0.1:" + port)
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			os.Exit(3)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, id) })
		mux.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
			if f := os.Getenv("HELPER_READY_FILE"); f != "" {
				if _, err := os.Stat(f); err != nil {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}
			io.WriteString(w, id)
		})
		srv = &http.Server{Handler: mux}
		go srv.Serve(ln)
	}
	<-sigs
	fmt.Println("helper", id, "got SIGTERM")
	if srv != nil {
		// Stop accepting first, then give the connections accepted just
		// before time to send their request, as the gateway does: Shutdown
		// alone answers such a connection with EOF (golang/go#75591), the
		// rare failed request of TestMakeBeforeBreak.
		srv.SetKeepAlivesEnabled(false)
		ln.Close()
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	os.Exit(0)
}

// supervisorMain runs a Supervisor on HELPER_MANIFESTS until SIGTERM, as
// `revgate supervise` does, so that tests can SIGKILL it.
func supervisorMain() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := New(Options{
		ManifestsDir:           os.Getenv("HELPER_MANIFESTS"),
		ReadyWithoutProbeAfter: 100 * time.Millisecond,
		Logger:                 slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}).Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func listenReusePort(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}

// helperPod returns a pod whose single container "main" runs the helper with env.
func helperPod(t *testing.T, name string, env map[string]string) *corev1.Pod {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vars := []corev1.EnvVar{{Name: "SUPERVISE_HELPER", Value: "1"}}
	for _, k := range keys {
		vars = append(vars, corev1.EnvVar{Name: k, Value: env[k]})
	}
	grace := int64(5)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "test"},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "main", Image: "ignored", Command: []string{exe}, Env: vars}},
		},
	}
}

// httpReadiness sets an httpGet readinessProbe on /ready of port, every second.
func httpReadiness(pod *corev1.Pod, port int) *corev1.Pod {
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
		PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1,
	}
	return pod
}

// writeManifest publishes pod as dir/name the way installers do: a dotfile
// renamed into place.
func writeManifest(t *testing.T, dir, name string, pod *corev1.Pod) {
	t.Helper()
	data, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, name, data)
}

func writeFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// syncWriter sends log output to t.Log until the test ends.
type syncWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	w := &syncWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fastOptions are options for tests: short periods and backoffs.
func fastOptions(t *testing.T, dir string) Options {
	return Options{
		ManifestsDir:           dir,
		RelistPeriod:           200 * time.Millisecond,
		RemoveDelay:            500 * time.Millisecond,
		ReadyWithoutProbeAfter: 200 * time.Millisecond,
		BackoffInitial:         50 * time.Millisecond,
		BackoffMax:             200 * time.Millisecond,
		BackoffReset:           10 * time.Minute,
		Logger:                 testLogger(t),
	}
}

// fakeOptions are fastOptions on a fake clock, which the test steps.
func fakeOptions(t *testing.T, dir string) (Options, *clocktest.Clock) {
	clk := newFakeClock()
	o := fastOptions(t, dir)
	o.Clock = clk
	return o, clk
}

// stepUntil steps clk by step every few milliseconds until cond holds: the
// wait of a test whose processes, real, also need time to pass on the
// supervisor's clock (probe periods, backoffs, ReadyWithoutProbeAfter).
func stepUntil(t *testing.T, clk *clocktest.Clock, step time.Duration, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, func() bool {
		if cond() {
			return true
		}
		clk.Step(step)
		return false
	})
}

// waitPending waits until n timers of d wait on clk: the loops that armed
// them are done with what came before.
func waitPending(t *testing.T, clk *clocktest.Clock, d time.Duration, n int) {
	t.Helper()
	if !clk.AwaitPending(d, n, 20*time.Second) {
		t.Fatalf("timed out waiting for %d timers of %s", n, d)
	}
}

// running is a Supervisor running in the background of a test.
type running struct {
	*Supervisor
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startSupervisor runs s until the test ends (or stop is called).
func startSupervisor(t *testing.T, s *Supervisor) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Supervisor: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of cancellation")
		}
	})
}

// pod returns the status of one pod, or ok=false.
func (r *running) pod(name string) (PodStatus, bool) {
	for _, p := range r.Status() {
		if p.Name == name {
			return p, true
		}
	}
	return PodStatus{}, false
}

// waitFor polls cond until it holds or the (generous) timeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finished reports whether every container of the pod's current generation
// is done for good: its run loop returned and nothing restarts it.
func (r *running) finished(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl := r.slots[name]
	return sl != nil && sl.current != nil && sl.current.finished()
}

// currentPID returns the pid of the main container of the pod's current generation.
func (r *running) currentPID(name string) int {
	p, ok := r.pod(name)
	if !ok || p.Current == nil || len(p.Current.Containers) == 0 {
		return 0
	}
	return p.Current.Containers[0].PID
}

func (r *running) currentReady(name string) bool {
	p, ok := r.pod(name)
	return ok && p.Current != nil && p.Current.Ready
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i > 0 && len(data) > i+2 && data[i+2] != 'Z'
}

// starts returns the lines the helpers appended to a starts file.
func starts(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(data), " ", "_"))
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newFakeClock returns a clock that moves only when a test steps it.
func newFakeClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}
