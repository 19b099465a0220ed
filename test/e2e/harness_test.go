package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/revgate/demo"
	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/internal/tcpmigrate"
	"github.com/revgate/revgate/revisions"
)

// revgateBin is the binary under test, built once by TestMain.
var revgateBin string

// Timings of the suite: short enough for the whole suite to take a few
// minutes, long enough for a loaded machine. The waits are generous; nothing
// asserts on how fast something happened.
const (
	fallbackTimeout = 12 * time.Second
	probeInterval   = 200 * time.Millisecond
	retryInitial    = 4 * time.Second
	retryMax        = 8 * time.Second
	// waitLong bounds any wait for a decision of the monitor (a fallback
	// after fallbackTimeout, a retry after retryInitial, ...).
	waitLong = 90 * time.Second
)

// tcpMigrate: see TestMain.
var tcpMigrate = flag.Bool("tcp-migrate", true, "set net.ipv4.tcp_migrate_req=1 when permitted (false leaves it as it is)")

func TestMain(m *testing.M) {
	flag.Parse()
	// The scenarios mostly wait on processes: run more of them at once
	// than there are CPUs, unless -parallel says otherwise.
	if f := flag.Lookup("test.parallel"); f != nil && !flagSet("test.parallel") {
		_ = f.Value.Set("8")
	}
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "revgate-e2e-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	revgateBin = filepath.Join(dir, "revgate")
	build := exec.Command("go", "build", "-o", revgateBin, "./cmd/revgate")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("build revgate: %w", err)
	}
	// Zero-failure rollouts need the connections queued on a replaced
	// proxy's SO_REUSEPORT listeners to move to its successor.
	if !*tcpMigrate {
		fmt.Fprintf(os.Stderr, "e2e: net.ipv4.tcp_migrate_req left as it is (enabled: %v)\n", tcpmigrate.Enabled())
	} else if changed, err := tcpmigrate.Enable(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: net.ipv4.tcp_migrate_req not set:", err)
	} else if changed {
		fmt.Fprintln(os.Stderr, "e2e: set net.ipv4.tcp_migrate_req=1")
	}
	// The cluster scenarios share one API server, stopped after the run.
	return kubetest.Run(m), nil
}

// Ports handed out by freeAddr come from below the kernel's ephemeral
// range, so that no outgoing connection (the load clients open thousands)
// and no other freeAddr call of this suite holds one: scenarios running in
// parallel must never share a port, which SO_REUSEPORT would allow
// silently.
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// freeAddr returns a loopback address whose port is free now and handed out
// to no one else in this run.
func freeAddr(t *testing.T) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for i := 0; i < 1000; i++ {
		port := portLow + rand.IntN(portHigh-portLow)
		if portsUsed[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		portsUsed[port] = true
		return addr
	}
	t.Fatal("no free port")
	return ""
}

// quiet discards the upstreams' logs.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// upstream is a real HTTP server started by the test; its responses name it.
type upstream struct {
	name, addr string
	mu         sync.Mutex
	cancel     context.CancelFunc
	done       chan struct{}
}

// startUpstream serves demo.Handler(name) on a fresh port.
func startUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	u := &upstream{name: name, addr: freeAddr(t)}
	u.start(t)
	t.Cleanup(u.stop)
	return u
}

// downUpstream reserves an address with nothing listening yet; start it later.
func downUpstream(t *testing.T, name string) *upstream {
	u := &upstream{name: name, addr: freeAddr(t)}
	t.Cleanup(u.stop)
	return u
}

func (u *upstream) start(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger briefly after a stop
		if ln, err = net.Listen("tcp", u.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start upstream %s: %v", u.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = demo.ServeListener(ctx, ln, u.name, quiet); close(done) }()
	u.mu.Lock()
	u.cancel, u.done = cancel, done
	u.mu.Unlock()
}

func (u *upstream) stop() {
	u.mu.Lock()
	cancel, done := u.cancel, u.done
	u.cancel, u.done = nil, nil
	u.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// source is the suite's gateway configuration for upstreams: an Ingress
// for every host, or with healthCheck an IngressRoute for gatewayHost.
func source(healthCheck bool, upstreams ...string) e2etest.Config {
	return e2etest.Config{Upstreams: upstreams, HealthCheck: healthCheck, Host: gatewayHost}
}

// env is one scenario's world: a root folder, its own ports and a running
// `revgate supervise`.
type env struct {
	t                              *testing.T
	root                           string
	layout                         revisions.Layout
	httpAddr, httpsAddr, adminAddr string
	superviseArgs                  []string

	mu      sync.Mutex
	sup     *exec.Cmd
	supDone <-chan struct{}
	logFile *os.File
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{
		t:    t,
		root: root,
		layout: revisions.Layout{
			Target:         "revgate",
			ResourceDir:    filepath.Join(root, "resources"),
			ManifestsDir:   filepath.Join(root, "manifests"),
			LockFile:       filepath.Join(root, "revgate.lock"),
			TerminationLog: filepath.Join(root, "log", "termination.log"),
		},
		httpAddr:  freeAddr(t),
		httpsAddr: freeAddr(t),
		adminAddr: freeAddr(t),
		superviseArgs: []string{
			"--relist-period=1s",
			"--remove-delay=500ms",
			"--backoff-initial=300ms",
			"--backoff-max=2s",
		},
	}
	for _, d := range []string{e.layout.ResourceDir, e.layout.ManifestsDir, filepath.Dir(e.layout.TerminationLog)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(root, "log", "supervise.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	e.logFile = f
	t.Cleanup(func() {
		e.stopSupervise(syscall.SIGTERM)
		if t.Failed() {
			e.dump()
		}
		f.Close()
	})
	return e
}

// dump logs what a failed scenario left behind.
func (e *env) dump() {
	t := e.t
	if data, err := os.ReadFile(e.layout.StateFile()); err == nil {
		t.Logf("state file:\n%s", data)
	}
	for _, s := range revisions.Slots {
		if data, err := os.ReadFile(e.layout.PublishedSlotManifest(s)); err == nil {
			t.Logf("operand manifest published in slot %s:\n%s", s, data)
		}
	}
	if data, err := os.ReadFile(e.layout.TerminationLog); err == nil {
		t.Logf("termination log:\n%s", data)
	}
	if data, err := os.ReadFile(e.logFile.Name()); err == nil {
		if len(data) > 12000 {
			data = data[len(data)-12000:]
		}
		t.Logf("supervise log (tail):\n%s", data)
	}
}

// startSupervise runs `revgate supervise` on the manifests dir.
func (e *env) startSupervise() {
	e.t.Helper()
	args := append([]string{"supervise", "--manifests-dir=" + e.layout.ManifestsDir}, e.superviseArgs...)
	cmd := exec.Command(revgateBin, args...)
	cmd.Stdout, cmd.Stderr = e.logFile, e.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done := startWatched(e.t, "supervise", cmd)
	e.mu.Lock()
	e.sup, e.supDone = cmd, done
	e.mu.Unlock()
}

// startWatched starts cmd (the test fails when it cannot) and returns a
// channel closed when the process has exited.
func startWatched(t *testing.T, what string, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return done
}

// signalAndWait sends sig to a process the test started and waits until
// done is closed; after timeout it kills the process and fails the test.
func signalAndWait(t *testing.T, what string, cmd *exec.Cmd, done <-chan struct{}, sig syscall.Signal, timeout time.Duration) {
	t.Helper()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not stop within %s of %s", what, timeout, sig)
	}
}

// stopSupervise signals the supervisor and waits for it; SIGKILL simulates
// a crash (its children get SIGTERM through their parent-death signal).
func (e *env) stopSupervise(sig syscall.Signal) {
	e.mu.Lock()
	cmd, done := e.sup, e.supDone
	e.sup, e.supDone = nil, nil
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	signalAndWait(e.t, "supervise", cmd, done, sig, 60*time.Second)
	// Anything it ran must be gone with it.
	waitNoProcesses(e.t, e.root, 40*time.Second)
}

// processesUnder returns the processes whose command line names a path
// under root: every pod of a scenario does.
func processesUnder(root string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !bytes.Contains(data, []byte(root+"/")) {
			continue
		}
		out = append(out, d.Name()+": "+strings.ReplaceAll(string(bytes.TrimRight(data, "\x00")), "\x00", " "))
	}
	return out
}

// waitNoProcesses waits until no process of the scenario rooted at root is
// left.
func waitNoProcesses(t *testing.T, root string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := processesUnder(root)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left %s after stopping:\n%s", d, strings.Join(left, "\n"))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// installArgs are the layout, port and timing flags of every install. The
// installer points the readiness probe and the monitor at --admin-addr.
func (e *env) installArgs() []string {
	return []string{
		"--target=" + e.layout.Target,
		"--resource-dir=" + e.layout.ResourceDir,
		"--manifests-dir=" + e.layout.ManifestsDir,
		"--lock-file=" + e.layout.LockFile,
		"--termination-log=" + e.layout.TerminationLog,
		"--binary=" + revgateBin,
		"--proxy-arg=--http-addr=" + e.httpAddr,
		"--proxy-arg=--https-addr=" + e.httpsAddr,
		"--proxy-arg=--admin-addr=" + e.adminAddr,
		"--monitor-arg=--fallback-timeout=" + fallbackTimeout.String(),
		"--monitor-arg=--probe-interval=" + probeInterval.String(),
		"--monitor-arg=--retry-initial=" + retryInitial.String(),
		"--monitor-arg=--retry-max=" + retryMax.String(),
	}
}

// revgate runs the binary and returns its combined output.
func revgate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, revgateBin, args...).CombinedOutput()
	return string(out), err
}

// installSpec says how to install one revision.
type installSpec struct {
	source string
	// extra are further install flags (--proxy-arg=...).
	extra []string
	// mutate changes the revision folder after it is written and before it
	// is published: the way to roll out what the installer would refuse.
	mutate func(t *testing.T, revDir string)
}

// install installs a revision and publishes it; it returns the revision
// and the time its operand manifest was published.
//
// A spec that mutates the revision is installed with --no-publish, edited,
// and published here exactly as the installer does (monitor manifest first,
// then the operand manifest, remove-then-write).
func (e *env) install(s installSpec) (int, time.Time) {
	t := e.t
	t.Helper()
	args := append([]string{"install", "--source-dir=" + s.source}, e.installArgs()...)
	args = append(args, s.extra...)
	if s.mutate == nil {
		out, err := revgate(t, args...)
		if err != nil {
			t.Fatalf("install: %v\n%s", err, out)
		}
		rev := parseInstalled(t, out)
		return rev, fileTime(t, e.operandManifest(rev))
	}
	out, err := revgate(t, append(args, "--no-publish")...)
	if err != nil {
		t.Fatalf("install --no-publish: %v\n%s", err, out)
	}
	rev := parseInstalled(t, out)
	s.mutate(t, e.layout.RevisionDir(rev))
	e2etest.Publish(t, e.layout, rev, revisions.DefaultPublishMode)
	return rev, time.Now()
}

// operandManifest is the published operand manifest of revision rev.
func (e *env) operandManifest(rev int) string {
	e.t.Helper()
	slots, err := e.layout.PublishedSlots(revisions.OS())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range slots {
		if s.Revision == rev {
			return s.Path
		}
	}
	e.t.Fatalf("revision %d is not published", rev)
	return ""
}

// installedFormat is how the install command reports the revision it wrote.
const installedFormat = "revision %d"

func parseInstalled(t *testing.T, out string) int {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), installedFormat, &n); err == nil && n > 0 {
			return n
		}
	}
	t.Fatalf("no revision in install output:\n%s", out)
	return 0
}

func fileTime(t *testing.T, path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return fi.ModTime()
}

// response is what one request to the gateway returned.
type response struct {
	status   int
	body     string
	revision string // the admin's revision header
	err      error
}

var httpClient = &http.Client{
	Timeout:   3 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// gatewayHost is the Host of every request to the gateway; the IngressRoute
// variant of the configuration serves it as its fqdn.
const gatewayHost = "e2e.example"

func get(url string) response {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{err: err}
	}
	req.Host = gatewayHost
	resp, err := httpClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(body), revision: resp.Header.Get(revisions.HeaderRevision), err: err}
}

// serving reports whether the gateway answers a route from upstream name
// and the admin endpoint is ready from revision rev.
func (e *env) serving(rev int, name string) (bool, string) {
	r := get("http://" + e.httpAddr + "/hello")
	if r.err != nil || r.status != http.StatusOK || !strings.HasPrefix(r.body, name+" ") {
		return false, fmt.Sprintf("GET /hello: %d %q %v", r.status, r.body, r.err)
	}
	a := get("http://" + e.adminAddr + "/readyz")
	if a.err != nil || a.status != http.StatusOK || a.revision != strconv.Itoa(rev) {
		return false, fmt.Sprintf("GET /readyz: %d revision %q %v", a.status, a.revision, a.err)
	}
	return true, ""
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	waitStable(t, d, what, 1, cond)
}

// waitStable polls cond until it holds n times in a row or d passes: during
// a make-before-break replacement two processes answer on the same ports,
// so one good answer proves little.
func waitStable(t *testing.T, d time.Duration, what string, n int, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	streak := 0
	for {
		ok, detail := cond()
		if ok {
			streak++
			if streak >= n {
				return
			}
		} else {
			streak = 0
		}
		if detail != "" {
			last = detail
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", d, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lkg returns the last-known-good revision, 0 when there is none.
func (e *env) lkg() int {
	n, err := e.layout.LastKnownGood(revisions.OS())
	if err != nil {
		return 0
	}
	return n
}

func (e *env) state() *revisions.State {
	s, err := revisions.LoadState(revisions.OS(), e.layout.StateFile())
	if err != nil {
		e.t.Fatalf("load state: %v", err)
	}
	return s
}

// published returns the serving operand manifest's revision and
// annotations (0 and nil when it cannot be read).
func (e *env) published() (int, map[string]string) {
	p, err := e2etest.ReadPublished(e.layout)
	if err != nil {
		return 0, nil
	}
	return p.ServingRevision, p.Serving.Annotations
}

// newest returns the highest published revision: one rolled out beside
// the serving one, else the serving one.
func (e *env) newest() int {
	p, _ := e2etest.ReadPublished(e.layout)
	return p.Newest
}

// waitGood waits until revision rev is last-known-good, its monitor is gone
// and the gateway serves it from upstream name.
func (e *env) waitGood(rev int, name string) {
	e.t.Helper()
	waitStable(e.t, waitLong, fmt.Sprintf("revision %d good and serving %s", rev, name), 5, func() (bool, string) {
		if n := e.lkg(); n != rev {
			return false, fmt.Sprintf("last-known-good is %d", n)
		}
		if _, err := os.Stat(e.layout.PublishedMonitorManifest()); err == nil {
			return false, "monitor manifest still published"
		}
		if p, err := e2etest.ReadPublished(e.layout); err != nil || p.Count != 1 || p.ServingRevision != rev {
			return false, fmt.Sprintf("published operand manifests %+v: %v", p, err)
		}
		return e.serving(rev, name)
	})
}

// waitFallback waits until the published operand manifest is revision to,
// annotated as a fallback from revision from with reason, and the gateway
// serves revision to from upstream name.
func (e *env) waitFallback(from, to int, reason, name string) map[string]string {
	e.t.Helper()
	var ann map[string]string
	waitStable(e.t, waitLong, fmt.Sprintf("fallback from %d to %d with %s", from, to, reason), 5, func() (bool, string) {
		n, a := e.published()
		if n != to || a[revisions.AnnotationFallbackForRevision] != strconv.Itoa(from) {
			return false, fmt.Sprintf("published revision %d, fallback-for %q reason %q", n, a[revisions.AnnotationFallbackForRevision], a[revisions.AnnotationFallbackReason])
		}
		ann = a
		return e.serving(to, name)
	})
	if got := ann[revisions.AnnotationFallbackReason]; got != reason {
		e.t.Fatalf("fallback reason %q, want %q (message %q)", got, reason, ann[revisions.AnnotationFallbackMessage])
	}
	if ann[revisions.AnnotationFallbackMessage] == "" {
		e.t.Errorf("fallback has no %s annotation", revisions.AnnotationFallbackMessage)
	}
	return ann
}

// logRecovery logs the time from publishing a bad revision to the
// last-known-good one serving again, in the format the reports collect.
func logRecovery(t *testing.T, scenario string, since time.Time) {
	t.Logf("recovery-time scenario=%s seconds=%.1f", scenario, time.Since(since).Seconds())
}

// startGood brings up supervise and a good revision 1 served by a fresh
// upstream named "v1"; it returns that upstream.
func (e *env) startGood() *upstream {
	e.t.Helper()
	up := startUpstream(e.t, "v1")
	e.startSupervise()
	rev, _ := e.install(installSpec{source: source(false, up.addr).Write(e.t)})
	if rev != 1 {
		e.t.Fatalf("first install is revision %d", rev)
	}
	e.waitGood(1, "v1")
	return up
}

// loadResult counts what a steady client saw.
type loadResult struct {
	total, failed int
	firstErrors   []string
	// bodies counts successful answers by the upstream that gave them.
	bodies map[string]int
	// statuses counts failed answers by HTTP status; the other failures
	// are connection errors.
	statuses map[int]int
}

// load hammers the gateway from a few goroutines until stop is closed.
func (e *env) load(workers int, stop <-chan struct{}) <-chan loadResult {
	out := make(chan loadResult, 1)
	var mu sync.Mutex
	res := loadResult{bodies: map[string]int{}, statuses: map[int]int{}}
	var wg sync.WaitGroup
	// Half the clients reuse connections, half open one per request: the
	// latter find out whether a connection queued on a closing listener is
	// lost.
	reuse := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < workers; i++ {
		client, kind := reuse, "keep-alive"
		if i%2 == 1 {
			client, kind = fresh, "new-connection"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr+"/load", nil)
				req.Host = gatewayHost
				resp, err := client.Do(req)
				var body []byte
				status := 0
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						status = resp.StatusCode
						err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(body))
					}
				}
				mu.Lock()
				res.total++
				if status != 0 {
					res.statuses[status]++
				}
				if err != nil {
					res.failed++
					if len(res.firstErrors) < 5 {
						res.firstErrors = append(res.firstErrors, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), kind, err))
					}
				} else if f := strings.Fields(string(body)); len(f) > 0 {
					res.bodies[f[0]]++
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		reuse.CloseIdleConnections()
		out <- res
	}()
	return out
}
