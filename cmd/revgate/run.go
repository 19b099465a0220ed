package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/revgate/revgate/demo"
	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/internal/tcpmigrate"
	"github.com/revgate/revgate/revisions"
)

// Defaults of `revgate run`.
const (
	defaultRunRoot            = ".run"
	defaultRunFallbackTimeout = 60 * time.Second
	defaultRunRetryInitial    = 2 * time.Minute
	// defaultHTTPURL and defaultAdminURL are where the proxy serves with its
	// default --http-addr and --admin-addr.
	defaultHTTPURL  = "http://127.0.0.1:8080"
	defaultAdminURL = "http://127.0.0.1:9901"
	// runReadyWait bounds the wait for the gateway before the banner.
	runReadyWait = 60 * time.Second
	// runStopGrace bounds the wait for the supervisor after SIGTERM; the
	// proxy's own grace period is 30s.
	runStopGrace = 45 * time.Second
	// demoManifestName is the demo upstreams' file in the manifests dir.
	demoManifestName = "demo-upstreams.yaml"
	// defaultRunSource is installed as revision 1 when it is a folder and
	// --source is not given; otherwise the embedded examples are.
	defaultRunSource = "examples"
)

// runSuperviseArgs restart crashed containers sooner than on a server, so
// that a crash-looping revision is told apart within seconds on a laptop.
var runSuperviseArgs = []string{"--backoff-initial=1s", "--backoff-max=30s"}

// runOptions are the flags of `revgate run`.
type runOptions struct {
	// root is the local folder holding everything; default .run.
	root string
	// source is the configuration installed as revision 1; default
	// ./examples when it exists, else the embedded example configuration
	// written to <root>/examples. resolveSource fills it in.
	source string
	// embedded is set by resolveSource when source is the embedded copy.
	embedded bool
	// demoPorts are the loopback ports of the demo upstreams, one per
	// demo.DefaultUpstreams; default 9081 and 9082. The embedded example
	// configuration is written pointing at them.
	demoPorts []int
	// target is the target name; default revgate.
	target string
	// httpAddr and adminAddr override the proxy's listen addresses; empty
	// keeps the proxy's defaults (:8080 and 127.0.0.1:9901).
	httpAddr, adminAddr string
	// httpsAddr is the proxy's HTTPS listen address, the proxy's default
	// (:8443) unless set; empty disables the listener.
	httpsAddr string
	// fallbackTimeout and retryInitial are handed to the startup monitor of
	// every revision; defaults 60s and 2m suit a laptop.
	fallbackTimeout, retryInitial time.Duration
	// demo runs the demo upstreams the example configuration points at;
	// default true.
	demo bool
	// logFile receives the supervisor's and the pods' logs; default
	// <root>/log/revgate.log, "-" for stderr.
	logFile string
	// tcpMigrate sets net.ipv4.tcp_migrate_req=1 when possible; default true.
	tcpMigrate bool
	// superviseArgs are extra arguments of `revgate supervise` (hidden; tests
	// shorten backoffs with them).
	superviseArgs []string
	// binary is this executable (absolute).
	binary string
}

func (o *runOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.root, "root", defaultRunRoot, "local folder for revisions, manifests, the lock and logs")
	fs.StringVar(&o.source, "source", "", "configuration folder installed as revision 1 when no revision exists yet (default: ./examples when it exists, else the example configuration built into revgate, written to <root>/examples)")
	fs.StringVar(&o.target, "target", revisions.DefaultTarget, "target name")
	fs.StringVar(&o.httpAddr, "http-addr", "", "proxy HTTP listen address (default: the proxy's, :8080)")
	fs.StringVar(&o.adminAddr, "admin-addr", "", "proxy admin listen address (default: the proxy's, 127.0.0.1:9901)")
	fs.StringVar(&o.httpsAddr, "https-addr", cmdline.NewProxy().HTTPS, "proxy HTTPS listen address (empty disables it)")
	fs.DurationVar(&o.fallbackTimeout, "fallback-timeout", defaultRunFallbackTimeout, "how long the startup monitor gives a new revision before falling back")
	fs.DurationVar(&o.retryInitial, "retry-initial", defaultRunRetryInitial, "first retry delay of a revision that failed for a retried reason")
	fs.BoolVar(&o.demo, "demo", true, "run the demo upstreams that the example configuration points at (see --demo-ports)")
	fs.IntSliceVar(&o.demoPorts, "demo-ports", demoDefaultPorts(), "loopback ports of the two demo upstreams; the built-in example configuration is written pointing at them")
	fs.StringVar(&o.logFile, "log-file", "", `file for the supervisor's and the pods' logs (default <root>/log/revgate.log; "-" for stderr)`)
	fs.BoolVar(&o.tcpMigrate, "tcp-migrate-req", true, "set net.ipv4.tcp_migrate_req=1 when permitted, so replacing the proxy drops no queued connection")
	fs.StringArrayVar(&o.superviseArgs, "supervise-arg", nil, "extra argument of revgate supervise (repeatable)")
	_ = fs.MarkHidden("supervise-arg")
}

func (o *runOptions) validate() error {
	var errs []error
	if o.root == "" {
		errs = append(errs, errors.New("--root is empty"))
	}
	if o.fallbackTimeout <= 0 || o.retryInitial <= 0 {
		errs = append(errs, errors.New("--fallback-timeout and --retry-initial must be positive"))
	}
	if err := o.validateDemoPorts(); err != nil {
		errs = append(errs, err)
	}
	o.resolveSource()
	for name, addr := range map[string]string{"--http-addr": o.httpAddr, "--admin-addr": o.adminAddr, "--https-addr": o.httpsAddr} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	exe, err := os.Executable()
	if err != nil {
		errs = append(errs, fmt.Errorf("find this executable: %w", err))
	}
	o.binary = exe
	return errors.Join(errs...)
}

// layout is the on-disk layout under root; relative when root is.
func (o *runOptions) layout() revisions.Layout {
	return revisions.Layout{
		Target:         o.target,
		ResourceDir:    filepath.Join(o.root, "resources"),
		ManifestsDir:   filepath.Join(o.root, "manifests"),
		LockFile:       filepath.Join(o.root, o.target+".lock"),
		TerminationLog: filepath.Join(o.root, "log", "termination.log"),
	}
}

// absLayout is layout with absolute paths, for everything rendered into pods.
func (o *runOptions) absLayout() (revisions.Layout, error) {
	l := o.layout()
	for _, p := range []*string{&l.ResourceDir, &l.ManifestsDir, &l.LockFile, &l.TerminationLog} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return l, fmt.Errorf("resolve %s: %w", *p, err)
		}
		*p = abs
	}
	return l, nil
}

// urls are where the gateway serves.
func (o *runOptions) urls() (httpURL, adminURL string) {
	httpURL, adminURL = defaultHTTPURL, defaultAdminURL
	if o.httpAddr != "" {
		httpURL = localURL(o.httpAddr)
	}
	if o.adminAddr != "" {
		adminURL = localURL(o.adminAddr)
	}
	return httpURL, adminURL
}

// localURL is the http:// URL of a local listener bound to addr.
func localURL(addr string) string {
	if host, port, ok := cmdline.LocalEndpoint(addr); ok {
		return "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	}
	return "http://" + addr
}

// install is the command line of `revgate install` for layout l, without
// --source-dir: the same for revision 1 and for the command printed for the
// next revision, so every revision gets the same proxy and monitor settings.
func (o *runOptions) install(l revisions.Layout) cmdline.Install {
	in := cmdline.NewInstall()
	in.Layout = cmdline.Layout(l)
	proxy := cmdline.NewProxy()
	if o.httpAddr != "" {
		proxy.HTTP = o.httpAddr
	}
	if o.adminAddr != "" {
		// The installer points the readiness probe and the startup
		// monitor at the admin address given to the proxy.
		proxy.Admin = o.adminAddr
	}
	proxy.HTTPS = o.httpsAddr
	in.Render.ProxyArgs = proxy.Overrides()
	monitor := cmdline.NewMonitor()
	monitor.FallbackTimeout, monitor.RetryInitial = o.fallbackTimeout, o.retryInitial
	in.Render.MonitorArgs = monitor.Overrides()
	return in
}

// run prepares the root, installs revision 1 when there is none, publishes
// the demo upstreams and supervises the manifests dir until ctx is done.
func (o *runOptions) run(ctx context.Context, out io.Writer) error {
	log := slog.Default().With("component", "run")
	l, err := o.absLayout()
	if err != nil {
		return err
	}
	for _, dir := range []string{l.ResourceDir, l.ManifestsDir, filepath.Dir(l.TerminationLog)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}

	if o.tcpMigrate {
		switch changed, err := tcpmigrate.Enable(); {
		case err != nil:
			log.Debug("net.ipv4.tcp_migrate_req not set; a proxy replacement may reset queued connections", "err", err)
		case changed:
			fmt.Fprintln(out, "set net.ipv4.tcp_migrate_req=1: connections queued on a replaced proxy move to its successor")
		}
	}

	logw, closeLog, err := o.openLog()
	if err != nil {
		return err
	}
	defer closeLog()

	// The proxy shares its ports with SO_REUSEPORT, so another gateway
	// already on them would silently take part of the traffic.
	if err := o.checkPortsFree(); err != nil {
		return err
	}
	if err := o.installFirst(ctx, l, out, logw); err != nil {
		return err
	}

	demoPath := filepath.Join(l.ManifestsDir, demoManifestName)
	if o.demo {
		if err := publishIfChanged(demoPath, o.binary, o.demoUpstreams()); err != nil {
			return err
		}
	} else if err := revisions.OS().RemoveFile(demoPath); err != nil {
		return fmt.Errorf("remove demo upstreams: %w", err)
	}

	return o.supervise(ctx, l, out, logw)
}

// checkPortsFree fails when something already answers on the gateway's
// HTTP, HTTPS or admin address: nothing of this root runs yet, so it is
// another process.
func (o *runOptions) checkPortsFree() error {
	httpURL, adminURL := o.urls()
	addrs := []string{strings.TrimPrefix(httpURL, "http://"), strings.TrimPrefix(adminURL, "http://")}
	if o.httpsAddr != "" {
		addrs = append(addrs, strings.TrimPrefix(localURL(o.httpsAddr), "http://"))
	}
	if o.demo {
		for _, u := range o.demoUpstreams() {
			addrs = append(addrs, u.Addr)
		}
	}
	for _, addr := range addrs {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			continue
		}
		c.Close()
		return fmt.Errorf("%s is already served by another process (a revgate run left over?); stop it or choose other --http-addr, --https-addr, --admin-addr or --demo-ports", addr)
	}
	return nil
}

// installFirst installs --source as revision 1 when the root holds no
// revision yet, and otherwise says where the root stands.
func (o *runOptions) installFirst(ctx context.Context, l revisions.Layout, out, logw io.Writer) error {
	fs := revisions.OS()
	listing, err := l.List(fs)
	if err != nil {
		return err
	}
	if listing.Highest() > 0 {
		published, lkg := "none", "none"
		if n, err := l.ServingRevision(fs); err == nil {
			published = fmt.Sprint(n)
		}
		if n, err := l.LastKnownGood(fs); err == nil {
			lkg = fmt.Sprint(n)
		}
		fmt.Fprintf(out, "resuming %s: revisions %s installed, %s published, last-known-good %s\n",
			o.root, joinInts(listing.Revisions), published, lkg)
		return nil
	}
	if o.embedded {
		if err := writeExamples(o.source, o.demoPorts); err != nil {
			return err
		}
		fmt.Fprintf(out, "no ./examples here: wrote the example configuration built into revgate to %s\n", o.source)
	}
	src, err := filepath.Abs(o.source)
	if err != nil {
		return fmt.Errorf("resolve --source: %w", err)
	}
	fmt.Fprintf(out, "installing %s as revision 1 under %s\n", o.source, o.root)
	in := o.install(l)
	in.SourceDir = src
	cmd := exec.CommandContext(ctx, o.binary, append([]string{cmdline.InstallCommand}, in.Args()...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, io.MultiWriter(logw, &stderr)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("install revision 1 from %s: %w\n%s", o.source, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// supervise runs `revgate supervise` on the manifests dir, prints the
// banner once the gateway is ready, and stops the supervisor when ctx ends.
func (o *runOptions) supervise(ctx context.Context, l revisions.Layout, out, logw io.Writer) error {
	supArgs := append([]string{"supervise", "--manifests-dir=" + l.ManifestsDir}, runSuperviseArgs...)
	sup := exec.Command(o.binary, append(supArgs, o.superviseArgs...)...)
	sup.Stdout, sup.Stderr = logw, logw
	// Its own process group, so that a Ctrl-C reaches the supervisor only
	// through us, once; and SIGTERM should we die without stopping it.
	sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := sup.Start(); err != nil {
		return fmt.Errorf("start the supervisor: %w", err)
	}
	// exited is closed once the supervisor is gone; supErr is then its result.
	exited := make(chan struct{})
	var supErr error
	go func() { supErr = sup.Wait(); close(exited) }()

	httpURL, adminURL := o.urls()
	readyCtx, cancel := context.WithTimeout(ctx, runReadyWait)
	ready := waitReady(readyCtx, adminURL+"/readyz", exited)
	cancel()
	o.banner(out, httpURL, adminURL, ready)

	select {
	case <-exited:
		return fmt.Errorf("the supervisor exited: %w", errOrExit(supErr))
	case <-ctx.Done():
	}
	fmt.Fprintln(out, "stopping ...")
	_ = sup.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if supErr != nil && !isSignalExit(supErr) {
			return fmt.Errorf("the supervisor: %w", supErr)
		}
	case <-time.After(runStopGrace):
		_ = sup.Process.Kill()
		<-exited
		return errors.New("the supervisor did not stop in time; killed it")
	}
	fmt.Fprintln(out, "stopped")
	return nil
}

func errOrExit(err error) error {
	if err == nil {
		return errors.New("exit status 0")
	}
	return err
}

func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGINT)
}

func (o *runOptions) openLog() (io.Writer, func(), error) {
	path := o.logFile
	if path == "-" {
		return os.Stderr, func() {}, nil
	}
	if path == "" {
		path = filepath.Join(o.root, "log", "revgate.log")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open log file: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// publishIfChanged writes the demo upstreams' pod manifest unless the file
// already holds it, so a resumed run does not restart them.
func publishIfChanged(path, binary string, ups []demo.Upstream) error {
	data, err := demo.PodManifest(binary, ups)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := revisions.OS().WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("publish demo upstreams: %w", err)
	}
	return nil
}

// waitReady polls url until it answers 200, ctx is done or the supervisor
// exits; it reports whether the gateway became ready.
func waitReady(ctx context.Context, url string, exited <-chan struct{}) bool {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-exited:
			return false
		case <-tick.C:
		}
	}
}

func (o *runOptions) banner(out io.Writer, httpURL, adminURL string, ready bool) {
	l := o.layout()
	self := "revgate"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
	}
	state := "ready"
	if !ready {
		state = "not ready yet; see " + adminURL + "/readyz?verbose"
	}
	targetFlag := ""
	if l.Target != revisions.DefaultTarget {
		targetFlag = " --target " + l.Target
	}
	logFile := o.logFile
	if logFile == "" {
		logFile = filepath.Join(o.root, "log", "revgate.log")
	}
	fmt.Fprintf(out, `
revgate is running (%s)
  gateway   %s
  admin     %s   (/readyz?verbose, /debug/config/routes, /debug/config/fallback)
  logs      %s

Install the next revision (edit %s first):
  %s install --source-dir %s %s

See revisions, the last-known-good one, fallbacks and retries:
  %s status%s --resource-dir %s --manifests-dir %s

Ctrl-C stops everything; running this again resumes without reinstalling.
`, state, httpURL, adminURL, logFile, o.editHint(),
		self, o.source, strings.Join(o.install(l).Args(), " "),
		self, targetFlag, l.ResourceDir, l.ManifestsDir)
}

// editHint says what to edit for the next revision: the copy written from
// the embedded examples is the user's own; another folder is better copied.
func (o *runOptions) editHint() string {
	if o.embedded {
		return o.source
	}
	return "a copy of " + o.source
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

func newRunCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run revgate locally: install the example configuration and supervise the gateway",
		Long: `Run is the embedded default. It creates a local root folder (resources/,
manifests/, the lock and log/), installs --source as revision 1 when no
revision exists yet, publishes the demo upstreams, and supervises the
manifests dir: the gateway, its startup monitor and the demo upstreams run as
host processes. Without --source it installs ./examples when that folder
exists, and otherwise the example configuration built into revgate, written
to <root>/examples with the demo upstreams at --demo-ports; so it works from
any folder, and beside other servers with --http-addr, --admin-addr and
--demo-ports. Install further revisions with the printed command; the
startup monitor falls back to the last-known-good revision when one fails.
Ctrl-C stops everything; running it again on the same root resumes.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.addFlags(cmd)
	return cmd
}

func init() { rootCmd.AddCommand(newRunCommand()) }
