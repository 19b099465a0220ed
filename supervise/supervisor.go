// Package supervise runs static-pod manifests as host processes where there
// is no kubelet: on edge hosts under systemd, in development and in tests.
//
// It watches a manifests dir (fsnotify plus a periodic relist), runs each
// container of each pod as a process group, restarts exits per the pod's
// restartPolicy with a CrashLoopBackOff-like backoff, and replaces a changed
// pod make-before-break: the new processes start beside the old ones (the
// operand binds its ports with SO_REUSEPORT) and the old ones are stopped
// only once the new ones are ready.
//
// A pod is identified by its manifest's file name. Decisions that differ from
// the kubelet:
//   - A manifest that cannot be read, parsed or run (no command, ...) starts
//     nothing, and a pod already running from an earlier content of that file
//     keeps running unchanged: a bad update never stops a good process. A
//     startup monitor therefore sees "the new revision never started".
//   - A removed manifest stops its pod only if the file is still absent after
//     Options.RemoveDelay, so "remove, then write" is an update.
//   - As under the kubelet, a manifest with metadata.uid is the same pod as
//     long as its uid and spec are: a change of labels or annotations alone
//     keeps its processes running (the startup monitor annotates a serving
//     manifest in place). Without a uid any change is a new pod.
//   - A container without readinessProbe counts as ready once it has run
//     for Options.ReadyWithoutProbeAfter (1s); only then does it replace the
//     old pod.
//   - A new pod that never gets ready never stops the old one: the old one
//     keeps running (there is no give-up timeout; a startup monitor decides
//     to fall back), and a newer manifest replaces the pending pod.
//   - Images, volumes, resources, securityContext, init containers and
//     startup probes are ignored; env valueFrom and envFrom are ignored with
//     a log line. Readiness and liveness probes are supported (httpGet,
//     tcpSocket, exec).
//
// While an old and a new process share a port, a probe connection may be
// accepted by either. Network probes therefore check, before closing the
// connection, which process holds its server side (/proc/net/tcp and the
// socket inodes under /proc/<pid>/fd of the probed process group); an answer
// from another process is not counted and the probe retries on a new
// connection.
//
// Crash safety: processes get Pdeathsig SIGTERM, so a SIGKILLed supervisor
// takes its pods along; when restarted it starts what the manifests say and
// has nothing else to clean up.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/internal/doubling"
)

// Defaults of Options.
const (
	DefaultManifestsDir           = "/etc/kubernetes/manifests"
	DefaultRelistPeriod           = 5 * time.Second
	DefaultRemoveDelay            = 2 * time.Second
	DefaultReadyWithoutProbeAfter = 1 * time.Second
	DefaultBackoffInitial         = 10 * time.Second
	DefaultBackoffMax             = 5 * time.Minute
	DefaultBackoffReset           = 10 * time.Minute
	watchRetryInitial             = 1 * time.Second
	watchRetryMax                 = 30 * time.Second
)

// Options configure a Supervisor. Zero fields take the defaults named.
type Options struct {
	// ManifestsDir is the folder of pod manifests (default
	// /etc/kubernetes/manifests). A missing folder is an empty one.
	ManifestsDir string
	// RelistPeriod is how often the folder is read even without file events
	// (default 5s).
	RelistPeriod time.Duration
	// RemoveDelay is how long a manifest must stay absent before its pod is
	// stopped (default 2s), so that "remove, then write" is an update.
	RemoveDelay time.Duration
	// ReadyWithoutProbeAfter is how long a container without readinessProbe
	// must run before it counts as ready and may replace an older pod
	// (default 1s).
	ReadyWithoutProbeAfter time.Duration
	// BackoffInitial is the first restart delay (default 10s); it doubles on
	// each restart up to BackoffMax (default 5m) and starts over once a
	// process has run for BackoffReset (default 10m).
	BackoffInitial time.Duration
	// BackoffMax caps the restart delay (default 5m).
	BackoffMax time.Duration
	// BackoffReset is the uptime after which the delay starts over (default 10m).
	BackoffReset time.Duration
	// Clock is the time of every delay, period, grace and backoff of the
	// supervisor (default clock.RealClock). Probe timeouts are socket and
	// exec deadlines and stay on the wall clock.
	Clock clock.Clock
	// Logger receives transitions and container output (default slog.Default()).
	// Container lines carry the attributes pod, container and stream.
	Logger *slog.Logger
	// Notifier receives sd_notify states; nil sends none.
	Notifier Notifier
	// WatchdogInterval is how often WATCHDOG=1 is sent; 0 sends none.
	WatchdogInterval time.Duration
	// StatusFile, when set, is kept holding the JSON StatusFile document,
	// rewritten atomically on every change (default: none).
	StatusFile string
}

func (o *Options) setDefaults() {
	if o.ManifestsDir == "" {
		o.ManifestsDir = DefaultManifestsDir
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.RelistPeriod, DefaultRelistPeriod)
	if o.RemoveDelay < 0 {
		o.RemoveDelay = 0
	}
	if o.ReadyWithoutProbeAfter < 0 {
		o.ReadyWithoutProbeAfter = 0
	}
	def(&o.BackoffInitial, DefaultBackoffInitial)
	def(&o.BackoffMax, DefaultBackoffMax)
	def(&o.BackoffReset, DefaultBackoffReset)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Notifier sends a service manager notification such as "READY=1".
type Notifier interface {
	Notify(state string) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(state string) error

// Notify calls f.
func (f NotifierFunc) Notify(state string) error { return f(state) }

var _ Notifier = NotifierFunc(nil)

// Supervisor runs the pods of a manifests dir. Create it with New and call Run.
type Supervisor struct {
	opts Options
	log  *slog.Logger

	// newWatcher creates the file watcher; tests replace it to break the watch.
	newWatcher func() (*fsnotify.Watcher, error)

	wake   chan struct{}
	stopWG sync.WaitGroup

	// lastStatus is the status file content last written; main loop only.
	lastStatus []byte

	mu      sync.Mutex
	slots   map[string]*slot
	invalid map[string]invalidManifest
	genSeq  int
}

// invalidManifest is a manifest file that is present but cannot be run.
type invalidManifest struct {
	rawHash string
	err     error
}

// slot is one pod (one manifest file name) and its generations.
type slot struct {
	name string
	// current is the generation that serves; next is a newer one that is
	// starting beside it and replaces it once ready.
	current, next *generation
	// missingSince is when the manifest was first seen absent; zero while present.
	missingSince time.Time
}

// New returns a Supervisor for opts (defaults applied).
func New(opts Options) *Supervisor {
	opts.setDefaults()
	return &Supervisor{
		opts:       opts,
		log:        opts.Logger.With("component", "supervise"),
		newWatcher: fsnotify.NewWatcher,
		wake:       make(chan struct{}, 1),
		slots:      map[string]*slot{},
		invalid:    map[string]invalidManifest{},
	}
}

func (s *Supervisor) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Supervisor) notify(state string) {
	if s.opts.Notifier == nil {
		return
	}
	if err := s.opts.Notifier.Notify(state); err != nil {
		s.log.Warn("notifying the service manager failed", "state", state, "err", err)
	}
}

// Run supervises until ctx is cancelled, then stops every pod gracefully
// (in parallel) and returns nil. READY=1 is sent once the first listing has
// started every pod.
func (s *Supervisor) Run(ctx context.Context) error {
	clk := s.opts.Clock
	s.log.Info("supervising static pods", "manifests_dir", s.opts.ManifestsDir, "relist_period", s.opts.RelistPeriod)
	triggers := make(chan struct{}, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		s.watch(watchCtx, triggers)
	}()

	removeAt := s.relist()
	s.waitFirstStarts(ctx)
	s.notify("READY=1")
	s.notifyStatus()

	relist := clk.NewTimer(s.opts.RelistPeriod)
	var removal clock.Timer
	var watchdog clock.Timer
	if s.opts.WatchdogInterval > 0 {
		watchdog = clk.NewTimer(s.opts.WatchdogInterval)
	}
	armRemoval := func(at time.Time) {
		if removal != nil {
			removal.Stop()
			removal = nil
		}
		if !at.IsZero() {
			removal = clk.NewTimer(max(at.Sub(clk.Now()), time.Millisecond))
		}
	}
	armRemoval(removeAt)
	timerC := func(t clock.Timer) <-chan time.Time {
		if t == nil {
			return nil
		}
		return t.C()
	}
	for {
		select {
		case <-ctx.Done():
			stopWatch()
			relist.Stop()
			armRemoval(time.Time{})
			s.notify("STOPPING=1")
			s.shutdown()
			s.writeStatusFile(s.Status())
			<-watchDone
			return nil
		case <-triggers:
			armRemoval(s.relist())
		case <-relist.C():
			armRemoval(s.relist())
			relist = clk.NewTimer(s.opts.RelistPeriod)
		case <-timerC(removal):
			removal = nil
			armRemoval(s.relist())
		case <-s.wake:
			s.mu.Lock()
			s.evaluateLocked()
			s.mu.Unlock()
			s.notifyStatus()
		case <-timerC(watchdog):
			s.notify("WATCHDOG=1")
			watchdog = clk.NewTimer(s.opts.WatchdogInterval)
		}
	}
}

// waitFirstStarts waits until every container of the running generations has
// attempted its first start, so READY=1 means "everything was started".
func (s *Supervisor) waitFirstStarts(ctx context.Context) {
	s.mu.Lock()
	var waits []<-chan struct{}
	for _, sl := range s.slots {
		for _, g := range []*generation{sl.current, sl.next} {
			if g == nil {
				continue
			}
			for _, c := range g.containers {
				waits = append(waits, c.attempted)
			}
		}
	}
	s.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
}

// watch keeps an fsnotify watch on the manifests dir and triggers a relist
// on every event; a failed watcher is restarted with backoff, and the
// periodic relist covers the time it is down.
func (s *Supervisor) watch(ctx context.Context, triggers chan<- struct{}) {
	clk := s.opts.Clock
	retries := doubling.New(watchRetryInitial, watchRetryMax, clk)
	for {
		began := clk.Now()
		err := s.watchOnce(ctx, triggers)
		if ctx.Err() != nil {
			return
		}
		if clk.Since(began) > time.Minute {
			retries.Reset()
		}
		delay := retries.NextBackOff()
		s.log.Warn("watching the manifests dir failed, relisting periodically until the watch is back", "err", err, "retry_in", delay)
		if !sleep(clk, delay, ctx.Done()) {
			return
		}
	}
}

func trigger(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (s *Supervisor) watchOnce(ctx context.Context, triggers chan<- struct{}) error {
	w, err := s.newWatcher()
	if err != nil {
		return fmt.Errorf("create watcher: %w", err)
	}
	defer w.Close()
	dir := filepath.Clean(s.opts.ManifestsDir)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	// Files created while no watch was in place are found by this relist.
	trigger(triggers)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("watcher closed its event channel")
			}
			if filepath.Clean(ev.Name) == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				return fmt.Errorf("manifests dir %s was removed or renamed", dir)
			}
			if strings.HasPrefix(filepath.Base(ev.Name), ".") {
				continue // temp files; their rename into place is an event of its own
			}
			trigger(triggers)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("watcher closed its error channel")
			}
			return fmt.Errorf("watcher: %w", err)
		}
	}
}

// relist reads the manifests dir and reconciles the pods with it. It returns
// when the next pending removal falls due (zero when none is pending).
func (s *Supervisor) relist() time.Time {
	ms, err := readManifests(s.opts.ManifestsDir)
	if err != nil {
		// A folder that cannot be read says nothing about the pods: keep them.
		s.log.Error("listing manifests failed, keeping pods as they are", "err", err)
		return time.Time{}
	}
	now := s.opts.Clock.Now()
	var nextRemoval time.Time
	s.mu.Lock()
	for name := range s.invalid {
		if _, ok := ms[name]; !ok {
			delete(s.invalid, name)
		}
	}
	names := make([]string, 0, len(ms))
	for name := range ms {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := ms[name]
		sl := s.slots[name]
		if m.err != nil {
			if prev, ok := s.invalid[name]; !ok || prev.rawHash != m.rawHash {
				if sl != nil {
					s.log.Error("manifest is invalid, the pod keeps running as it was", "pod", name, "err", m.err)
				} else {
					s.log.Error("manifest is invalid, not starting it", "pod", name, "err", m.err)
				}
			}
			s.invalid[name] = invalidManifest{rawHash: m.rawHash, err: m.err}
			if sl != nil {
				sl.missingSince = time.Time{}
			}
			continue
		}
		delete(s.invalid, name)
		if sl == nil {
			sl = &slot{name: name}
			s.slots[name] = sl
		}
		if !sl.missingSince.IsZero() {
			s.log.Info("manifest is back, pod not stopped", "pod", name)
			sl.missingSince = time.Time{}
		}
		s.updateLocked(sl, m)
	}
	for name, sl := range s.slots {
		if _, ok := ms[name]; ok {
			continue
		}
		if sl.missingSince.IsZero() {
			sl.missingSince = now
			if s.opts.RemoveDelay > 0 {
				s.log.Info("manifest is gone, stopping the pod unless it comes back", "pod", name, "within", s.opts.RemoveDelay)
			}
		}
		if due := sl.missingSince.Add(s.opts.RemoveDelay); now.Before(due) {
			if nextRemoval.IsZero() || due.Before(nextRemoval) {
				nextRemoval = due
			}
			continue
		}
		s.log.Info("manifest removed, stopping pod", "pod", name)
		s.stopLocked(sl.next, "manifest removed")
		s.stopLocked(sl.current, "manifest removed")
		delete(s.slots, name)
	}
	s.evaluateLocked()
	s.mu.Unlock()
	s.notifyStatus()
	return nextRemoval
}

// updateLocked starts a generation for m unless one with its fingerprint
// already runs. A pod with a serving generation gets the new one beside it.
func (s *Supervisor) updateLocked(sl *slot, m manifest) {
	if sl.next != nil {
		if sl.next.fingerprint == m.fingerprint {
			return
		}
		s.stopLocked(sl.next, "superseded by a newer manifest before it was ready")
		sl.next = nil
	}
	if sl.current != nil && sl.current.fingerprint == m.fingerprint {
		return
	}
	s.genSeq++
	if n := len(m.pod.Spec.InitContainers); n > 0 {
		s.log.Warn("init containers are not run by the supervisor; starting the containers without them", "pod", sl.name, "init_containers", n)
	}
	g := newGeneration(s.genSeq, sl.name, m.pod, m.fingerprint, &s.opts, s.poke)
	if sl.current == nil {
		s.log.Info("starting pod", "pod", sl.name, "generation", g.id, "fingerprint", g.fingerprint)
		sl.current = g
	} else {
		s.log.Info("manifest changed, starting the new pod beside the running one", "pod", sl.name,
			"generation", g.id, "fingerprint", g.fingerprint, "replaces", sl.current.id)
		sl.next = g
	}
	g.start()
}

// evaluateLocked promotes a next generation once it is ready, or at once if
// the current one has nothing running any more.
func (s *Supervisor) evaluateLocked() {
	for _, sl := range s.slots {
		if sl.next == nil {
			continue
		}
		switch {
		case sl.next.ready():
			s.log.Info("new pod ready, replacing the old one", "pod", sl.name, "generation", sl.next.id, "replaces", sl.current.id)
		case sl.current.finished():
			s.log.Info("old pod has no running process, replacing it", "pod", sl.name, "generation", sl.next.id, "replaces", sl.current.id)
		default:
			continue
		}
		s.stopLocked(sl.current, "replaced")
		sl.current, sl.next = sl.next, nil
	}
}

// stopLocked stops g in the background; shutdown waits for all such stops.
func (s *Supervisor) stopLocked(g *generation, why string) {
	if g == nil {
		return
	}
	s.log.Info("stopping pod", "pod", g.pod, "generation", g.id, "reason", why)
	s.stopWG.Add(1)
	go func() {
		defer s.stopWG.Done()
		g.stop()
		s.log.Info("pod stopped", "pod", g.pod, "generation", g.id)
		s.poke()
	}()
}

// shutdown stops every pod in parallel and waits for them.
func (s *Supervisor) shutdown() {
	s.mu.Lock()
	s.log.Info("shutting down, stopping all pods", "pods", len(s.slots))
	for name, sl := range s.slots {
		s.stopLocked(sl.next, "shutdown")
		s.stopLocked(sl.current, "shutdown")
		delete(s.slots, name)
	}
	s.mu.Unlock()
	s.stopWG.Wait()
	s.log.Info("all pods stopped")
}

// notifyStatus publishes the state: STATUS= to the service manager and the
// status file.
func (s *Supervisor) notifyStatus() {
	if s.opts.Notifier == nil && s.opts.StatusFile == "" {
		return
	}
	st := s.Status()
	s.writeStatusFile(st)
	if s.opts.Notifier == nil {
		return
	}
	ready, replacing, invalid := 0, 0, 0
	for _, p := range st {
		if p.Invalid != "" {
			invalid++
		}
		if p.Current != nil && p.Current.Ready {
			ready++
		}
		if p.Next != nil {
			replacing++
		}
	}
	s.notify(fmt.Sprintf("STATUS=%d pods, %d ready, %d replacing, %d invalid manifests", len(st), ready, replacing, invalid))
}

// PodStatus is the state of one pod (one manifest file).
type PodStatus struct {
	// Name is the manifest file name.
	Name string `json:"name"`
	// Current is the serving generation; nil when only an invalid manifest exists.
	Current *GenerationStatus `json:"current,omitempty"`
	// Next is a newer generation waiting to become ready.
	Next *GenerationStatus `json:"next,omitempty"`
	// Invalid is the error of the file's present content, if it cannot be run.
	Invalid string `json:"invalid,omitempty"`
	// Removing is set while the manifest is absent but the pod not yet stopped.
	Removing bool `json:"removing,omitempty"`
}

// GenerationStatus is the state of the processes started from one manifest content.
type GenerationStatus struct {
	ID          int               `json:"id"`
	Fingerprint string            `json:"fingerprint"`
	Ready       bool              `json:"ready"`
	Containers  []ContainerStatus `json:"containers"`
}

// ContainerStatus is the state of one container's process.
type ContainerStatus struct {
	Name string `json:"name"`
	// State is one of waiting, running, backoff, exited, stopped.
	State string `json:"state"`
	// PID is the running process (its process group id); 0 when none runs.
	PID      int  `json:"pid,omitempty"`
	Restarts int  `json:"restarts"`
	Ready    bool `json:"ready"`
	// LastExitCode is the last exit code (128+signal when killed, -1 when it
	// could not start); nil before the first exit.
	LastExitCode *int `json:"lastExitCode,omitempty"`
}

// Status returns the state of every pod, sorted by name.
func (s *Supervisor) Status() []PodStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PodStatus
	for name, sl := range s.slots {
		ps := PodStatus{Name: name, Removing: !sl.missingSince.IsZero()}
		ps.Current = sl.current.status()
		ps.Next = sl.next.status()
		if inv, ok := s.invalid[name]; ok {
			ps.Invalid = inv.err.Error()
		}
		out = append(out, ps)
	}
	for name, inv := range s.invalid {
		if _, ok := s.slots[name]; !ok {
			out = append(out, PodStatus{Name: name, Invalid: inv.err.Error()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// generation is the set of processes started from one manifest content.
type generation struct {
	id          int
	pod         string
	fingerprint string
	containers  []*containerRunner
	cancel      context.CancelFunc
	ctx         context.Context
	wg          sync.WaitGroup
}

func newGeneration(id int, name string, pod *corev1.Pod, fingerprint string, opts *Options, changed func()) *generation {
	ctx, cancel := context.WithCancel(context.Background())
	g := &generation{id: id, pod: name, fingerprint: fingerprint, ctx: ctx, cancel: cancel}
	log := opts.Logger.With("component", "supervise", "pod", name, "generation", id)
	for _, c := range pod.Spec.Containers {
		g.containers = append(g.containers, newContainerRunner(pod, c, opts, log, changed))
	}
	return g
}

func (g *generation) start() {
	for _, c := range g.containers {
		g.wg.Go(func() { c.run(g.ctx) })
	}
}

// stop stops every container gracefully and waits for them.
func (g *generation) stop() {
	g.cancel()
	g.wg.Wait()
}

// ready reports whether every container is ready.
func (g *generation) ready() bool {
	for _, c := range g.containers {
		if !c.isReady() {
			return false
		}
	}
	return true
}

// finished reports whether no container runs or will be restarted.
func (g *generation) finished() bool {
	for _, c := range g.containers {
		if !c.isFinished() {
			return false
		}
	}
	return true
}

func (g *generation) status() *GenerationStatus {
	if g == nil {
		return nil
	}
	st := &GenerationStatus{ID: g.id, Fingerprint: g.fingerprint, Ready: g.ready()}
	for _, c := range g.containers {
		st.Containers = append(st.Containers, c.status())
	}
	return st
}
