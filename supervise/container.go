package supervise

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/internal/doubling"
)

// Container states reported in ContainerStatus.State.
const (
	StateWaiting = "waiting" // not started yet
	StateRunning = "running" // a process is running
	StateBackoff = "backoff" // exited, waiting to be restarted
	StateExited  = "exited"  // exited and not restarted (restartPolicy)
	StateStopped = "stopped" // stopped by the supervisor
)

const (
	defaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// defaultGrace is terminationGracePeriodSeconds when the pod sets none.
	defaultGrace = 30 * time.Second
	// logWaitOnExit bounds the wait for the last output lines of an exited process.
	logWaitOnExit = 200 * time.Millisecond
)

// containerRunner runs one container of one generation of a pod: it starts
// the process, restarts it per the pod's restartPolicy with backoff, and
// probes its readiness.
type containerRunner struct {
	spec     corev1.Container
	policy   corev1.RestartPolicy
	grace    time.Duration
	opts     *Options
	log      *slog.Logger
	changed  func() // tells the supervisor that state changed
	procRoot string

	// attempted is closed once the first start has been attempted.
	attempted     chan struct{}
	attemptedOnce sync.Once

	mu       sync.Mutex
	state    string
	pid      int
	restarts int
	lastExit int
	exited   bool // lastExit is set
	ready    bool
	finished bool
}

func newContainerRunner(pod *corev1.Pod, c corev1.Container, opts *Options, log *slog.Logger, changed func()) *containerRunner {
	grace := defaultGrace
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		grace = time.Duration(*g) * time.Second
	}
	policy := pod.Spec.RestartPolicy
	if policy == "" {
		policy = corev1.RestartPolicyAlways
	}
	return &containerRunner{
		spec: c, policy: policy, grace: grace, opts: opts, changed: changed,
		log: log.With("container", c.Name), state: StateWaiting, procRoot: "/proc",
		attempted: make(chan struct{}),
	}
}

// status returns a snapshot of the container's state.
func (c *containerRunner) status() ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ContainerStatus{Name: c.spec.Name, State: c.state, PID: c.pid, Restarts: c.restarts, Ready: c.ready}
	if c.exited {
		code := c.lastExit
		st.LastExitCode = &code
	}
	return st
}

func (c *containerRunner) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

func (c *containerRunner) isFinished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished
}

func (c *containerRunner) set(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	c.changed()
}

func (c *containerRunner) markAttempted() {
	c.attemptedOnce.Do(func() { close(c.attempted) })
}

func (c *containerRunner) setReady(ready bool, msg string) {
	c.mu.Lock()
	was := c.ready
	c.ready = ready
	pid := c.pid
	c.mu.Unlock()
	if was == ready {
		return
	}
	if ready {
		c.log.Info("container ready", "pid", pid, "reason", msg)
	} else {
		c.log.Warn("container not ready", "pid", pid, "reason", msg)
	}
	c.changed()
}

// run runs the container until ctx is cancelled or the restart policy says
// it is done; on cancellation the running process is stopped gracefully.
func (c *containerRunner) run(ctx context.Context) {
	defer c.markAttempted()
	defer c.set(func() { c.finished = true; c.ready = false })
	clk := c.opts.Clock
	restarts := doubling.New(c.opts.BackoffInitial, c.opts.BackoffMax, clk)
	for {
		code, up, err := c.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Error("starting container failed", "err", err)
		}
		restart := c.policy == corev1.RestartPolicyAlways ||
			(c.policy == corev1.RestartPolicyOnFailure && (err != nil || code != 0))
		if !restart {
			c.log.Info("container exited, not restarting", "exit_code", code, "restart_policy", c.policy)
			c.set(func() { c.state = StateExited })
			return
		}
		if up >= c.opts.BackoffReset {
			restarts.Reset()
		}
		delay := restarts.NextBackOff()
		c.log.Info("back-off restarting container", "exit_code", code, "delay", delay, "restart_policy", c.policy)
		c.set(func() { c.state = StateBackoff })
		if !sleep(clk, delay, ctx.Done()) {
			return
		}
		c.set(func() { c.restarts++ })
	}
}

// runOnce starts the process and waits for it to exit, or stops it when ctx
// is cancelled. It returns the exit code and how long the process ran.
func (c *containerRunner) runOnce(ctx context.Context) (int, time.Duration, error) {
	defer c.markAttempted()
	spec, err := c.processSpec()
	if err != nil {
		c.set(func() { c.lastExit, c.exited = -1, true })
		return -1, 0, err
	}
	clk := c.opts.Clock
	p, err := startProcess(spec, c.log, clk.Now())
	if err != nil {
		c.set(func() { c.lastExit, c.exited = -1, true })
		return -1, 0, err
	}
	c.log.Info("container started", "pid", p.pid, "command", spec.path, "args", spec.args[1:])
	c.set(func() { c.state, c.pid = StateRunning, p.pid })
	c.markAttempted()

	pctx, stopProbe := context.WithCancel(ctx)
	var probes sync.WaitGroup
	probes.Go(func() { c.probeLoop(pctx, p, spec.env) })
	if c.spec.LivenessProbe != nil {
		probes.Go(func() { c.livenessLoop(pctx, p, spec.env) })
	}
	stopped := false
	select {
	case <-p.done:
	case <-ctx.Done():
		stopped = true
		c.log.Info("stopping container", "pid", p.pid, "grace", c.grace)
		p.terminate(clk, c.grace, c.log)
	}
	stopProbe()
	probes.Wait()
	// Let the last lines of output land before the exit is logged.
	logs := make(chan struct{})
	go func() { p.logsWG.Wait(); close(logs) }()
	wait := clk.NewTimer(logWaitOnExit)
	select {
	case <-logs:
	case <-wait.C():
	}
	wait.Stop()
	code := p.exit()
	up := clk.Since(p.started)
	c.set(func() {
		c.ready = false
		c.pid = 0
		c.lastExit, c.exited = code, true
		if stopped {
			c.state = StateStopped
		}
	})
	if stopped {
		c.log.Info("container stopped", "pid", p.pid, "exit_code", code)
	} else {
		c.log.Warn("container exited", "pid", p.pid, "exit_code", code, "uptime", up.Round(time.Millisecond))
	}
	return code, up, nil
}

// probeLoop decides readiness of process p. Without a readinessProbe the
// container counts as ready once it has run for Options.ReadyWithoutProbeAfter.
func (c *containerRunner) probeLoop(ctx context.Context, p *process, env []string) {
	probe := c.spec.ReadinessProbe
	if probe == nil {
		if sleep(c.opts.Clock, c.opts.ReadyWithoutProbeAfter, ctx.Done()) {
			c.setReady(true, fmt.Sprintf("running for %s, no readiness probe", c.opts.ReadyWithoutProbeAfter))
		}
		return
	}
	pr := c.prober(probe, env)
	needOK, needFail := pr.thresholds()
	oks, fails := 0, 0
	c.probeEvery(ctx, "readiness", pr, p, func(ok bool, msg string) bool {
		if ok {
			oks, fails = oks+1, 0
			if oks >= needOK {
				c.setReady(true, "readiness probe passed")
			}
			return true
		}
		oks, fails = 0, fails+1
		if fails >= needFail {
			c.setReady(false, msg)
		}
		return true
	})
}

// livenessLoop stops process p once its livenessProbe has failed
// failureThreshold times in a row; the restart policy then applies.
func (c *containerRunner) livenessLoop(ctx context.Context, p *process, env []string) {
	pr := c.prober(c.spec.LivenessProbe, env)
	_, needFail := pr.thresholds()
	fails := 0
	c.probeEvery(ctx, "liveness", pr, p, func(ok bool, msg string) bool {
		if ok {
			fails = 0
			return true
		}
		if fails++; fails < needFail {
			return true
		}
		c.log.Warn("liveness probe failed, stopping the container", "pid", p.pid, "failures", fails, "reason", msg)
		p.terminate(c.opts.Clock, c.grace, c.log)
		return false
	})
}

// prober returns the prober of one of the container's probes.
func (c *containerRunner) prober(probe *corev1.Probe, env []string) *prober {
	return &prober{probe: probe, container: &c.spec, env: env, proc: procFS{root: c.procRoot}, clock: c.opts.Clock}
}

// probeEvery runs pr against p after the probe's initial delay and then
// every period, handing each counted outcome to f until ctx ends or f
// returns false. Uncounted outcomes (answers from another process) are
// logged only.
func (c *containerRunner) probeEvery(ctx context.Context, kind string, pr *prober, p *process, f func(ok bool, msg string) bool) {
	clk := c.opts.Clock
	if !sleep(clk, time.Duration(pr.probe.InitialDelaySeconds)*time.Second, ctx.Done()) {
		return
	}
	lastMsg := ""
	for {
		began := clk.Now()
		out, msg := pr.check(ctx, p.pid)
		if ctx.Err() != nil {
			return
		}
		c.log.Debug(kind+" probe", "pid", p.pid, "outcome", out, "reason", msg, "took", clk.Since(began))
		if out != probeSuccess && msg != lastMsg {
			c.log.Info(kind+" probe did not pass", "pid", p.pid, "outcome", out, "reason", msg)
		}
		lastMsg = msg
		if out != probeUncounted && !f(out == probeSuccess, msg) {
			return
		}
		if !sleep(clk, pr.period(), ctx.Done()) {
			return
		}
	}
}

// processSpec turns the container into a host process: command[0] looked up
// in PATH, $(VAR) references in command and args expanded as in Kubernetes,
// and an environment of PATH plus the container's env values.
func (c *containerRunner) processSpec() (processSpec, error) {
	env, vars := c.environment()
	argv := make([]string, 0, len(c.spec.Command)+len(c.spec.Args))
	for _, a := range append(append([]string{}, c.spec.Command...), c.spec.Args...) {
		argv = append(argv, expandVars(a, vars))
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil {
			return processSpec{}, fmt.Errorf("look up command %q: %w", path, err)
		}
		path = lp
	} else if !filepath.IsAbs(path) && c.spec.WorkingDir != "" {
		path = filepath.Join(c.spec.WorkingDir, path)
	}
	return processSpec{path: path, args: argv, env: env, dir: c.spec.WorkingDir}, nil
}

// environment builds the process environment. Host processes do not inherit
// the supervisor's environment (which may carry NOTIFY_SOCKET and other
// systemd variables meant for the supervisor alone), only its PATH.
func (c *containerRunner) environment() ([]string, map[string]string) {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPATH
	}
	vars := map[string]string{"PATH": path}
	order := []string{"PATH"}
	if len(c.spec.EnvFrom) > 0 {
		c.log.Warn("envFrom is not supported by host processes; ignored")
	}
	for _, e := range c.spec.Env {
		if e.ValueFrom != nil {
			c.log.Warn("env valueFrom is not supported by host processes; variable left unset", "name", e.Name)
			continue
		}
		if _, ok := vars[e.Name]; !ok {
			order = append(order, e.Name)
		}
		vars[e.Name] = expandVars(e.Value, vars)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, vars
}

// expandVars expands $(NAME) references to defined variables and $$ to $,
// leaving unknown references as they are, as Kubernetes does.
func expandVars(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte('$')
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
