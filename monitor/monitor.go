// Package monitor is revgate's startup monitor. It watches one newly
// published revision of a static pod until it is started, healthy and ready
// (then points last-known-good at it and removes its own manifest), or until
// it fails (then puts the last-known-good revision back, annotated with why,
// and schedules a retry for reasons that may be temporary).
//
// It sees the operand only through the termination log, the admin endpoint
// (/healthz, /readyz?verbose) and, with a kubeconfig, the mirror pod; every
// write is taken under the lock shared with the installer and the pruner,
// after checking again that the published operand manifest is still this
// monitor's revision.
package monitor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/revisions"
)

// Defaults of Options.
const (
	DefaultHealthzURL         = "http://127.0.0.1:9901/healthz"
	DefaultReadyzURL          = "http://127.0.0.1:9901/readyz"
	DefaultFallbackTimeout    = 5 * time.Minute
	DefaultProbeInterval      = time.Second
	DefaultReadySuccesses     = 3
	DefaultCrashloopThreshold = 3
	DefaultRetryInitial       = 10 * time.Minute
	DefaultRetryMax           = 6 * time.Hour
)

// PodSource returns the operand's mirror pod.
type PodSource interface {
	MirrorPod(ctx context.Context) (*corev1.Pod, error)
}

// EventSink records a Kubernetes Event on the operand's mirror pod.
type EventSink interface {
	Emit(ctx context.Context, eventType, reason, message string) error
}

// Kubernetes event reasons emitted by the monitor.
const (
	EventRevisionGood            = "RevisionGood"
	EventFallbackToLastKnownGood = "FallbackToLastKnownGood"
	EventNoFallbackRevision      = "NoFallbackRevision"
	EventRetryScheduled          = "RetryScheduled"
	EventRetryStarted            = "RetryStarted"
)

// Options configure a Monitor. Zero values take the defaults named on each
// field.
type Options struct {
	// Revision is the revision watched; required.
	Revision int
	// Layout of the target; its empty fields are defaulted.
	Layout revisions.Layout
	// FS is the file-system seam; default revisions.OS().
	FS *revisions.FS
	// HealthzURL default DefaultHealthzURL; ReadyzURL default DefaultReadyzURL
	// (asked with ?verbose).
	HealthzURL, ReadyzURL string
	// FallbackTimeout runs from the moment the operand manifest of this
	// revision is seen published; default 5m.
	FallbackTimeout time.Duration
	// ProbeInterval between checks; default 1s.
	ProbeInterval time.Duration
	// ReadySuccesses is how many passes in a row make the revision good; default 3.
	ReadySuccesses int
	// CrashloopThreshold is the number of starts in one rollout that decide
	// CrashLooping at once, without waiting for the timeout; default 3.
	CrashloopThreshold int
	// RetryInitial and RetryMax bound the retry backoff; default 10m and 6h.
	RetryInitial, RetryMax time.Duration
	// LockTimeout bounds the wait for the lock; default revisions.DefaultLockTimeout.
	LockTimeout time.Duration
	// Clock reads the time and waits: the fallback timeout, the probe
	// interval, the retry schedule and the mirror-pod refresh all go
	// through it, so tests move time instead of sleeping; default
	// clock.RealClock{}.
	Clock clock.Clock
	// Prober asks the admin endpoint; default NewHTTPProber(2s).
	Prober Prober
	// Pods, when set, adds the mirror-pod check.
	Pods PodSource
	// Events, when set, receives Kubernetes Events.
	Events EventSink
	// Publish is how the installer published the revision; default
	// revisions.PublishReplace, the mode of a monitor manifest that does
	// not say.
	Publish revisions.PublishMode
	// Mirrors, when set, adds the mirror-pod check and receives Events in
	// slots mode, where the operand's mirror pod depends on its slot; it
	// also recreates the serving mirror pod after a fallback annotated its
	// manifest in place. Pods and Events are not used then.
	Mirrors MirrorPods
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Monitor watches one revision. Run drives it; Step makes one decision and
// is what tests drive directly.
type Monitor struct {
	opts Options
	fs   revisions.FS
	log  *slog.Logger

	// state is where the decision stands (machine.go).
	state state
	// seenAt is when the operand manifest of this revision was first seen
	// published in the current rollout; rolloutStart is its file's time,
	// from which on termination records count.
	seenAt       time.Time
	rolloutStart time.Time
	streak       int
	nextRetry    time.Time
	lastReason   string
	lastMessage  string
	events       []pendingEvent
	// eventPod is the static pod whose mirror pod Events go on in slots
	// mode: the one running this revision, or after a fallback the one
	// serving instead.
	eventPod string
	// refresh is a mirror pod to recreate once the lock is released.
	refresh *mirrorRefresh
}

// New checks and defaults opts.
func New(opts Options) (*Monitor, error) {
	if opts.Revision <= 0 {
		return nil, fmt.Errorf("revision must be positive, got %d", opts.Revision)
	}
	opts.Layout = opts.Layout.Defaulted()
	if err := opts.Layout.Validate(); err != nil {
		return nil, err
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.FallbackTimeout, DefaultFallbackTimeout)
	def(&opts.ProbeInterval, DefaultProbeInterval)
	def(&opts.RetryInitial, DefaultRetryInitial)
	def(&opts.RetryMax, DefaultRetryMax)
	def(&opts.LockTimeout, revisions.DefaultLockTimeout)
	if opts.RetryMax < opts.RetryInitial {
		return nil, fmt.Errorf("retry max %s is below retry initial %s", opts.RetryMax, opts.RetryInitial)
	}
	if opts.ReadySuccesses <= 0 {
		opts.ReadySuccesses = DefaultReadySuccesses
	}
	if opts.CrashloopThreshold <= 0 {
		opts.CrashloopThreshold = DefaultCrashloopThreshold
	}
	if opts.CrashloopThreshold < 2 {
		return nil, fmt.Errorf("crashloop threshold must be at least 2, got %d", opts.CrashloopThreshold)
	}
	if opts.HealthzURL == "" {
		opts.HealthzURL = DefaultHealthzURL
	}
	if opts.ReadyzURL == "" {
		opts.ReadyzURL = DefaultReadyzURL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Prober == nil {
		opts.Prober = NewHTTPProber(0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Publish == "" {
		opts.Publish = revisions.PublishReplace
	}
	if _, err := revisions.ParsePublishMode(string(opts.Publish)); err != nil {
		return nil, err
	}
	fs := revisions.OS()
	if opts.FS != nil {
		fs = *opts.FS
	}
	log := opts.Logger.With("component", "monitor", "target", opts.Layout.Target, "revision", opts.Revision)
	return &Monitor{opts: opts, fs: fs, log: log}, nil
}

// Run steps the monitor on every probe interval, and at once when the
// termination log's folder or the manifests dir changes, until the monitor
// is done (nil: exit 0) or ctx ends. Errors of a step (a lock timeout, a
// failed write) are logged and the step is tried again.
func (m *Monitor) Run(ctx context.Context) error {
	w := m.watch(ctx)
	for {
		done, err := m.Step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m.log.Error("monitor step failed; trying again", "err", err)
		}
		if done {
			return nil
		}
		w.addMissing()
		t := m.opts.Clock.NewTimer(m.opts.ProbeInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		case <-w.changed:
			t.Stop()
		}
	}
}

// dirWatch reports changes of the termination log's folder and the
// manifests dir. It only hurries the next step: the loop looks on every
// interval anyway, and adds a folder that did not exist yet (or was removed)
// at its next wait.
type dirWatch struct {
	w       *fsnotify.Watcher // nil without a watcher
	dirs    []string
	changed chan struct{}

	mu    sync.Mutex
	added map[string]bool
}

func (m *Monitor) watch(ctx context.Context) *dirWatch {
	d := &dirWatch{
		dirs:    []string{filepath.Dir(m.opts.Layout.TerminationLog), m.opts.Layout.ManifestsDir},
		changed: make(chan struct{}, 1),
		added:   map[string]bool{},
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		m.log.Warn("no file watcher; relying on the probe interval", "err", err)
		return d
	}
	d.w = w
	d.addMissing()
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Op.Has(fsnotify.Remove) || ev.Op.Has(fsnotify.Rename) {
					if _, err := m.fs.Stat(ev.Name); err != nil {
						d.forget(ev.Name)
					}
				}
				select {
				case d.changed <- struct{}{}:
				default:
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				m.log.Warn("file watcher error", "err", err)
			}
		}
	}()
	return d
}

// addMissing watches the folders not watched yet.
func (d *dirWatch) addMissing() {
	if d.w == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, dir := range d.dirs {
		if d.added[dir] {
			continue
		}
		if err := d.w.Add(dir); err == nil {
			d.added[dir] = true
		}
	}
}

// forget marks a watched folder gone: the kernel dropped its watch.
func (d *dirWatch) forget(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.added, dir)
}

// observation is what one look at the files finds.
type observation struct {
	rev       int
	highest   int // highest revision folder
	published int // revision of the published operand manifest, 0 when none or unreadable
	// ownPath is the published operand manifest of this revision; empty
	// when this revision is not published.
	ownPath string
}

func (o observation) superseded() bool { return o.highest > o.rev || o.published > o.rev }

func (m *Monitor) observe() (observation, error) {
	if m.slots() {
		return m.observeSlots()
	}
	l := m.opts.Layout
	lst, err := l.List(m.fs)
	if err != nil {
		return observation{}, err
	}
	o := observation{rev: m.opts.Revision, highest: lst.Highest()}
	pub, err := l.PublishedRevision(m.fs)
	switch {
	case err == nil:
		o.published = pub
	case errors.Is(err, revisions.ErrNoManifest):
	default:
		// A manifest that does not parse has no revision label to read, but
		// it may still be this revision's own (a badly formatted manifest is
		// the first failure the fallback exists for): it is ours when it is
		// byte for byte the manifest of this revision's folder.
		if m.publishedIsOwnManifest() {
			o.published = m.opts.Revision
		} else {
			m.log.Debug("published operand manifest unreadable", "err", err)
		}
	}
	if o.published == o.rev {
		o.ownPath = l.PublishedPodManifest()
	}
	return o, nil
}

// publishedIsOwnManifest reports whether the published operand manifest is
// exactly this revision's operand manifest.
func (m *Monitor) publishedIsOwnManifest() bool {
	l := m.opts.Layout
	pub, err := m.fs.ReadFile(l.PublishedPodManifest())
	if err != nil {
		return false
	}
	own, err := m.fs.ReadFile(l.RevisionPodManifest(m.opts.Revision))
	return err == nil && bytes.Equal(pub, own)
}

// completeGood finishes a good decision that a restart interrupted: the
// state file records this revision good and last-known-good points at it.
func (m *Monitor) completeGood(ctx context.Context) error {
	m.log.Info("revision already recorded good; removing the monitor manifest")
	return m.withLock(ctx, func() error {
		if err := m.removeOtherSlots(); err != nil {
			return err
		}
		return m.removeOwnManifest()
	})
}

// leave: a newer revision is installed, its monitor owns the manifests.
// The pending retry of this revision is cancelled and the published monitor
// manifest is removed only when it is still this revision's.
func (m *Monitor) leave(ctx context.Context, obs observation) error {
	m.log.Info("a newer revision is installed; leaving it to its monitor", "highest", obs.highest, "published", obs.published)
	return m.withLock(ctx, func() error {
		err := revisions.UpdateState(m.fs, m.opts.Layout.StateFile(), func(s *revisions.State) error {
			rs, ok := s.Revisions[m.opts.Revision]
			if !ok {
				return nil
			}
			rs.NextRetry = nil
			if rs.Outcome == "" || rs.Outcome == revisions.OutcomeInstalled {
				rs.Outcome = revisions.OutcomeSuperseded
			}
			return nil
		})
		if err != nil {
			return err
		}
		return m.removeOwnManifest()
	})
}

// beginRollout notes that this revision's operand manifest is published:
// the fallback timeout runs from now, and start records count from the
// manifest file's time.
func (m *Monitor) beginRollout(obs observation) error {
	fi, err := m.fs.Stat(obs.ownPath)
	if err != nil {
		return fmt.Errorf("stat published operand manifest: %w", err)
	}
	m.seenAt, m.rolloutStart = m.opts.Clock.Now(), fi.ModTime()
	m.log.Info("operand manifest of this revision is published; watching it", "published_at", m.rolloutStart, "timeout", m.opts.FallbackTimeout)
	return nil
}

// underRevision runs fn under the lock after checking again that the
// published operand manifest is still this revision and none newer exists.
// When that is no longer so it does not run fn and returns what it found
// instead: Superseded or OtherPublished.
func (m *Monitor) underRevision(ctx context.Context, fn func() error) (*verdict, error) {
	var changed *verdict
	err := m.withLock(ctx, func() error {
		obs, err := m.observe()
		if err != nil {
			return err
		}
		switch {
		case obs.superseded():
			changed = &verdict{in: inSuperseded, obs: obs}
		case obs.published != m.opts.Revision:
			changed = &verdict{in: inOtherPublished, obs: obs}
		default:
			return fn()
		}
		m.log.Info("published operand manifest changed before the decision; looking again", "published", obs.published, "highest", obs.highest)
		return nil
	})
	return changed, err
}

// withLock runs fn under the lock. Events fn records are sent after the
// lock is released, so the API server's latency never holds up an installer.
func (m *Monitor) withLock(ctx context.Context, fn func() error) error {
	lk, err := revisions.AcquireLock(ctx, m.opts.Layout.LockFile, m.opts.LockTimeout)
	if err != nil {
		return err
	}
	err = fn()
	if uerr := lk.Unlock(); uerr != nil {
		m.log.Warn("release lock", "err", uerr)
	}
	m.flushEvents(ctx)
	m.refreshMirror(ctx)
	return err
}

// good makes this revision the last-known-good one, records it and removes
// the monitor's own manifest. Its outcome is RecordedGood, or what
// underRevision found instead.
func (m *Monitor) good(ctx context.Context) (*verdict, error) {
	n := m.opts.Revision
	now := m.opts.Clock.Now()
	changed, err := m.underRevision(ctx, func() error {
		if err := m.opts.Layout.SetLastKnownGood(m.fs, n); err != nil {
			return fmt.Errorf("point last-known-good at revision %d: %w", n, err)
		}
		err := revisions.UpdateState(m.fs, m.opts.Layout.StateFile(), func(s *revisions.State) error {
			rs := s.Get(n)
			rs.Outcome = revisions.OutcomeGood
			rs.DecidedAt = now
			rs.NextRetry = nil
			rs.Reason, rs.Message = "", ""
			rs.Attempts = max(rs.Attempts, 1)
			s.LastKnownGood = n
			return nil
		})
		if err != nil {
			return fmt.Errorf("record revision %d good: %w", n, err)
		}
		m.log.Info("revision is good; last-known-good now points at it")
		m.event(ctx, corev1.EventTypeNormal, EventRevisionGood, fmt.Sprintf("revision %d started, is healthy and ready; it is the last-known-good revision now", n))
		if err := m.removeOtherSlots(); err != nil {
			return err
		}
		return m.removeOwnManifest()
	})
	switch {
	case err != nil:
		m.streak = 0 // the passes count again before the next try
		return nil, err
	case changed != nil:
		m.streak = 0
		return changed, nil
	}
	return &verdict{in: inRecordedGood}, nil
}

// fail records the failure of this rollout, puts the fallback revision back
// and schedules a retry for a retried reason. Its outcome is RecordedRetry or
// RecordedFailed as soon as the failure is recorded, even when putting the
// fallback in place fails after (the error is returned with it), or what
// underRevision found instead.
func (m *Monitor) fail(ctx context.Context, reason, message string) (*verdict, error) {
	n := m.opts.Revision
	now := m.opts.Clock.Now()
	var retryAt *time.Time
	recorded := false
	changed, err := m.underRevision(ctx, func() error {
		lst, err := m.opts.Layout.List(m.fs)
		if err != nil {
			return err
		}
		to := m.fallbackTarget(lst)
		err = revisions.UpdateState(m.fs, m.opts.Layout.StateFile(), func(s *revisions.State) error {
			rs := s.Get(n)
			attempt := max(rs.Attempts, 1)
			if revisions.Retried(reason) {
				t := now.Add(RetryDelay(m.opts.RetryInitial, m.opts.RetryMax, attempt))
				retryAt = &t
			}
			rs.Outcome = revisions.OutcomeFailed
			rs.Reason, rs.Message = reason, message
			rs.Attempts = attempt
			rs.NextRetry = retryAt
			rs.DecidedAt = now
			fb := revisions.Fallback{Time: now, Reason: reason, Message: message, To: to, Attempt: attempt}
			if k := len(rs.Fallbacks); k > 0 && rs.Fallbacks[k-1].Attempt == attempt {
				rs.Fallbacks[k-1] = fb // the same rollout decided again after an interrupted fallback
			} else {
				rs.Fallbacks = append(rs.Fallbacks, fb)
			}
			if lkg, err := m.opts.Layout.LastKnownGood(m.fs); err == nil {
				s.LastKnownGood = lkg
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("record failure of revision %d: %w", n, err)
		}
		recorded = true
		args := []any{"reason", reason, "message", message, "fallback_to", to}
		if retryAt != nil {
			args = append(args, "next_retry", *retryAt)
		}
		m.log.Warn("revision failed; falling back", args...)
		if err := m.publishFallback(ctx, true); err != nil {
			return err
		}
		if retryAt != nil {
			m.event(ctx, corev1.EventTypeNormal, EventRetryScheduled, fmt.Sprintf("revision %d is rolled out again at %s", n, retryAt.UTC().Format(time.RFC3339)))
		}
		return nil
	})
	switch {
	case changed != nil:
		return changed, nil
	case !recorded:
		return nil, err
	case retryAt != nil:
		return &verdict{in: inRecordedRetry, retryAt: *retryAt}, err
	}
	return &verdict{in: inRecordedFailed}, err
}

// finishFailed completes a failure that is not retried: the fallback is in
// place (published again if it was interrupted) and the monitor leaves.
func (m *Monitor) finishFailed(ctx context.Context) error {
	return m.withLock(ctx, func() error {
		if err := m.publishFallback(ctx, false); err != nil {
			return err
		}
		return m.removeOwnManifest()
	})
}

// startRetry publishes this revision's own operand manifest again and
// begins a new rollout: this monitor published it, so the fallback timeout
// and the count of start records run from now. Its outcome is RetryStarted,
// or Superseded when a newer revision came first.
func (m *Monitor) startRetry(ctx context.Context) (*verdict, error) {
	n := m.opts.Revision
	now := m.opts.Clock.Now()
	var attempt int
	var out *verdict
	err := m.withLock(ctx, func() error {
		obs, err := m.observe()
		if err != nil {
			return err
		}
		if obs.superseded() {
			out = &verdict{in: inSuperseded, obs: obs}
			return nil
		}
		data, err := m.fs.ReadFile(m.opts.Layout.RevisionPodManifest(n))
		if err != nil {
			return fmt.Errorf("read operand manifest of revision %d: %w", n, err)
		}
		if err := m.publishRetry(data); err != nil {
			return fmt.Errorf("publish revision %d again: %w", n, err)
		}
		err = revisions.UpdateState(m.fs, m.opts.Layout.StateFile(), func(s *revisions.State) error {
			rs := s.Get(n)
			rs.Attempts = max(rs.Attempts, 1) + 1
			rs.Outcome = revisions.OutcomeInstalled
			rs.NextRetry = nil
			attempt = rs.Attempts
			return nil
		})
		if err != nil {
			return fmt.Errorf("record retry of revision %d: %w", n, err)
		}
		m.seenAt, m.rolloutStart, m.streak, m.lastReason = now, now, 0, ""
		m.log.Info("retrying the revision", "attempt", attempt, "at", now)
		m.event(ctx, corev1.EventTypeNormal, EventRetryStarted, fmt.Sprintf("revision %d is rolled out again (attempt %d)", n, attempt))
		out = &verdict{in: inRetryStarted}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// removeOwnManifest removes the published monitor manifest when it is this
// revision's: a newer monitor's manifest has the same file name and must
// stay. Call it under the lock.
func (m *Monitor) removeOwnManifest() error {
	p := m.opts.Layout.PublishedMonitorManifest()
	rev, err := revisions.ReadRevisionLabel(m.fs, p)
	switch {
	case errors.Is(err, revisions.ErrNoManifest):
		return nil
	case err != nil:
		m.log.Warn("published monitor manifest has no usable revision label; leaving it", "err", err)
		return nil
	case rev != m.opts.Revision:
		m.log.Info("published monitor manifest belongs to another revision; leaving it", "its_revision", rev)
		return nil
	}
	if err := m.fs.RemoveFile(p); err != nil {
		return fmt.Errorf("remove own monitor manifest: %w", err)
	}
	m.log.Info("removed own monitor manifest")
	return nil
}

// pendingEvent is an Event to send; pod is the static pod whose mirror pod
// it goes on in slots mode.
type pendingEvent struct{ pod, typ, reason, message string }

// event queues a Kubernetes Event; withLock sends it.
func (m *Monitor) event(_ context.Context, typ, reason, message string) {
	if m.opts.Events == nil && m.opts.Mirrors == nil {
		return
	}
	m.events = append(m.events, pendingEvent{m.eventPod, typ, reason, message})
}

func (m *Monitor) flushEvents(ctx context.Context) {
	evs := m.events
	m.events = nil
	for _, ev := range evs {
		var err error
		if m.opts.Mirrors != nil && m.slots() {
			err = m.opts.Mirrors.EmitFor(ctx, ev.pod, ev.typ, ev.reason, ev.message)
		} else if m.opts.Events != nil {
			err = m.opts.Events.Emit(ctx, ev.typ, ev.reason, ev.message)
		}
		if err != nil {
			m.log.Warn("emit event", "event_reason", ev.reason, "err", err)
		}
	}
}
