package installer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/revgate/revgate/revisions"
)

// ErrRevisionTooLow is returned when the requested revision is not above the
// highest one installed.
var ErrRevisionTooLow = errors.New("revision is not above the highest installed revision")

// ValidationError is returned when the validator refuses the configuration,
// or finds warnings under Strict.
type ValidationError struct {
	Err      error
	Warnings []string
}

func (e *ValidationError) Error() string {
	if e.Err != nil {
		return "configuration refused: " + e.Err.Error()
	}
	return fmt.Sprintf("configuration refused in strict mode: %d warning(s): %s", len(e.Warnings), strings.Join(e.Warnings, "; "))
}

func (e *ValidationError) Unwrap() error { return e.Err }

// EventSink records a Kubernetes Event about the target's operand (in
// revgate, the mirror pod; the monitor's MirrorPod satisfies it).
type EventSink interface {
	Emit(ctx context.Context, eventType, reason, message string) error
}

// EventRevisionInstalled is the reason of the Event recorded after an install.
const EventRevisionInstalled = "RevisionInstalled"

// Installer writes one revision. Zero values of optional fields take their
// defaults.
type Installer struct {
	// Layout of the target (Defaulted is applied).
	Layout revisions.Layout
	// FS is the file-system seam; default revisions.OS().
	FS revisions.FS
	// Source yields the configuration (required).
	Source Source
	// Validator checks the configuration first; nil: no validation, and no
	// staged copy written for it (the cluster loop installs broken objects
	// on purpose, and a copy of thousands of files costs seconds).
	Validator Validator
	// Strict makes validation warnings refuse the install; default false.
	Strict bool
	// Render says what the pods run.
	Render RenderOptions
	// Revision to install; 0 means the highest installed + 1.
	Revision int
	// LockTimeout bounds the wait for the lock; default revisions.DefaultLockTimeout.
	LockTimeout time.Duration
	// NoPublish writes the revision without publishing its manifests.
	NoPublish bool
	// Events, when set, records an Event after a successful install; a
	// failure to record it is logged, not fatal.
	Events EventSink
	// Clock stamps the install time on the manifests; default
	// clock.RealClock.
	Clock clock.PassiveClock
	// Logger; default slog.Default().
	Logger *slog.Logger
	// PodEvents, when set, records the install Event on the mirror pod of
	// the static pod that runs the revision (in slots mode its name depends
	// on the slot) and Events is not used.
	PodEvents PodEventSink
	// NewUID gives the metadata.uid of a manifest published into a slot;
	// default revisions.NewUID.
	NewUID func() string
	// AfterStep, when set, is called after each step with its name; the crash
	// test uses it to widen the window in which a kill lands.
	AfterStep func(step string)
	// Precondition, when set, is called under the lock with the highest
	// installed revision (0 when there is none) before anything is written;
	// an error aborts the install and is returned as it is. The cluster loop
	// uses it to install only when the revision it compared its snapshot
	// with is still the highest one.
	Precondition func(highest int) error

	log *slog.Logger
}

// PodEventSink records a Kubernetes Event on the mirror pod of the node's
// static pod named staticPod (the monitor's NodeMirrorPods satisfies it).
type PodEventSink interface {
	EmitFor(ctx context.Context, staticPod, eventType, reason, message string) error
}

// Result says what an install did.
type Result struct {
	Revision  int
	Dir       string
	Warnings  []string
	Published bool
	// Slot is the slot the revision was published into (slots mode only).
	Slot revisions.Slot
	// PodName is the metadata.name of the static pod that runs the revision.
	PodName string
}

func (in *Installer) defaults() {
	in.Layout = in.Layout.Defaulted()
	if in.FS.OpenFile == nil {
		in.FS = revisions.OS()
	}
	if in.LockTimeout == 0 {
		in.LockTimeout = revisions.DefaultLockTimeout
	}
	if in.Clock == nil {
		in.Clock = clock.RealClock{}
	}
	if in.NewUID == nil {
		in.NewUID = revisions.NewUID
	}
	if in.Logger == nil {
		in.Logger = slog.Default()
	}
	in.log = in.Logger.With("component", "installer", "target", in.Layout.Target)
}

func (in *Installer) step(name string) {
	if in.AfterStep != nil {
		in.AfterStep(name)
	}
}

// Run validates the configuration, then under the lock writes the revision
// whole, records it in the state file and publishes the monitor manifest and
// then the operand manifest. Nothing is published when any step fails.
func (in *Installer) Run(ctx context.Context) (*Result, error) {
	in.defaults()
	if err := in.Layout.Validate(); err != nil {
		return nil, err
	}
	if in.Source == nil {
		return nil, errors.New("no configuration source")
	}
	if in.Render.Publish == "" {
		in.Render.Publish = revisions.DefaultPublishMode
	}
	if _, err := revisions.ParsePublishMode(string(in.Render.Publish)); err != nil {
		return nil, err
	}
	if in.Render.Binary == "" {
		return nil, errors.New("no revgate binary for the rendered pods")
	}
	if in.Revision < 0 {
		return nil, fmt.Errorf("invalid revision %d", in.Revision)
	}
	cfg, err := in.Source.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var warnings []string
	if in.Validator != nil {
		if warnings, err = in.validate(ctx, cfg); err != nil {
			return nil, err
		}
	}
	in.step("validated")

	res, err := in.locked(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res.Warnings = warnings
	// The Event is recorded after the lock is released: the API server may be
	// slow, and the monitor waits for the lock.
	in.recordEvent(ctx, res, "installed")
	return res, nil
}

// recordEvent records the install Event of res, if a sink is set; what
// says what was done ("installed").
func (in *Installer) recordEvent(ctx context.Context, res *Result, what string) {
	if in.Events == nil && in.PodEvents == nil {
		return
	}
	msg := fmt.Sprintf("revision %d %s in %s", res.Revision, what, res.Dir)
	if res.Published {
		msg = fmt.Sprintf("revision %d %s in %s and published", res.Revision, what, res.Dir)
	}
	if res.Slot != "" {
		msg += fmt.Sprintf(" in slot %s, beside the serving revision", res.Slot)
	}
	var err error
	if in.PodEvents != nil {
		err = in.PodEvents.EmitFor(ctx, res.PodName, "Normal", EventRevisionInstalled, msg)
	} else {
		err = in.Events.Emit(ctx, "Normal", EventRevisionInstalled, msg)
	}
	if err != nil {
		in.log.Warn("recording the install event failed", "revision", res.Revision, "err", err)
	}
}

// locked runs the critical section under the lock.
func (in *Installer) locked(ctx context.Context, cfg *Config) (*Result, error) {
	lock, err := revisions.AcquireLock(ctx, in.Layout.LockFile, in.LockTimeout)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	in.step("locked")
	return in.install(cfg)
}

// validate writes a staged copy of cfg to a temp folder and runs the validator on it.
func (in *Installer) validate(ctx context.Context, cfg *Config) ([]string, error) {
	tmp, err := os.MkdirTemp("", "revgate-validate-")
	if err != nil {
		return nil, fmt.Errorf("create validation folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "config")
	// A throw-away copy: no fsyncs, they would double the install's cost.
	if err := in.FS.WithoutSync().StageDir(dir, revisionDirMode, func(s *revisions.Stage) error {
		return writeConfig(s, cfg)
	}); err != nil {
		return nil, fmt.Errorf("stage configuration for validation: %w", err)
	}
	warnings, err := in.Validator.Validate(ctx, dir)
	if err != nil {
		return warnings, &ValidationError{Err: err, Warnings: warnings}
	}
	for _, w := range warnings {
		in.log.Warn("configuration warning", "warning", w)
	}
	if in.Strict && len(warnings) > 0 {
		return warnings, &ValidationError{Warnings: warnings}
	}
	return warnings, nil
}

func writeConfig(s *revisions.Stage, cfg *Config) error {
	for _, f := range cfg.files() {
		if err := s.WriteFile(f.rel, f.data, f.mode, f.dirMode); err != nil {
			return err
		}
	}
	return nil
}

// install is the critical section; the lock is held.
func (in *Installer) install(cfg *Config) (*Result, error) {
	l, f := in.Layout, in.FS
	listing, err := l.List(f)
	if err != nil {
		return nil, err
	}
	for _, name := range listing.Ignored {
		in.log.Warn("ignoring folder whose name is not a revision", "name", name)
	}
	if in.Precondition != nil {
		if err := in.Precondition(listing.Highest()); err != nil {
			return nil, err
		}
	}
	rev := in.Revision
	if rev == 0 {
		rev = listing.Highest() + 1
	} else if rev <= listing.Highest() {
		return nil, fmt.Errorf("install revision %d: highest installed is %d: %w", rev, listing.Highest(), ErrRevisionTooLow)
	}
	log := in.log.With("revision", rev)

	for _, dir := range []string{l.ResourceDir, l.ManifestsDir} {
		if err := f.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		if err := f.RemoveStale(dir); err != nil {
			return nil, err
		}
	}

	// Read the state before writing anything, so that an unreadable state
	// file refuses the install rather than leave an unrecorded revision.
	state, err := revisions.LoadState(f, l.StateFile())
	if err != nil {
		return nil, err
	}

	now := in.Clock.Now()
	pod, err := Marshal(OperandPod(l, rev, in.Render, now))
	if err != nil {
		return nil, err
	}
	monitor, err := Marshal(MonitorPod(l, rev, in.Render, now))
	if err != nil {
		return nil, err
	}
	in.step("rendered")

	dir := l.RevisionDir(rev)
	err = f.StageDir(dir, revisionDirMode, func(s *revisions.Stage) error {
		if err := writeConfig(s, cfg); err != nil {
			return err
		}
		in.step("config-written")
		if err := s.WriteFile(l.MonitorManifestName(), monitor, 0o644, revisionDirMode); err != nil {
			return err
		}
		return s.WriteFile(l.PodManifestName(), pod, 0o644, revisionDirMode)
	})
	if err != nil {
		return nil, fmt.Errorf("write revision %d: %w", rev, err)
	}
	log.Info("revision written", "dir", dir)
	in.step("revision-written")

	for n, r := range state.Revisions {
		if n < rev && r.NextRetry != nil {
			log.Info("newer revision supersedes a pending retry", "superseded", n)
			r.Outcome = revisions.OutcomeSuperseded
			r.NextRetry = nil
		}
	}
	attempts := 0
	if !in.NoPublish {
		attempts = 1
	}
	state.Revisions[rev] = &revisions.RevisionState{
		Revision:    rev,
		Outcome:     revisions.OutcomeInstalled,
		Attempts:    attempts,
		InstalledAt: now.UTC(),
	}
	if err := revisions.SaveState(f, l.StateFile(), state); err != nil {
		return nil, fmt.Errorf("record revision %d: %w", rev, err)
	}
	in.step("state-written")

	res := &Result{Revision: rev, Dir: dir, PodName: l.Target}
	if in.NoPublish {
		log.Info("revision not published (--no-publish)")
		return res, nil
	}
	if err := in.publish(log, rev, monitor, pod, res); err != nil {
		return nil, err
	}
	return res, nil
}

// publish publishes revision rev's monitor manifest, then its operand
// manifest (into the free slot in slots mode).
func (in *Installer) publish(log *slog.Logger, rev int, monitor, pod []byte, res *Result) error {
	l, f := in.Layout, in.FS
	// Where the operand manifest goes is decided before anything is
	// published, so that a slot that cannot be read publishes nothing.
	podPath, podData := l.PublishedPodManifest(), pod
	if in.Render.Publish != revisions.PublishReplace {
		slot, data, err := in.slotFor(pod)
		if err != nil {
			return fmt.Errorf("publish revision %d: %w", rev, err)
		}
		podPath, podData = l.PublishedSlotManifest(slot), data
		res.Slot, res.PodName = slot, l.SlotPodName(slot)
	}
	if err := f.Publish(l.PublishedMonitorManifest(), monitor); err != nil {
		return fmt.Errorf("publish monitor manifest of revision %d: %w", rev, err)
	}
	in.step("monitor-published")
	if err := f.Publish(podPath, podData); err != nil {
		return fmt.Errorf("publish operand manifest of revision %d: %w", rev, err)
	}
	res.Published = true
	log.Info("revision published", "manifests_dir", l.ManifestsDir, "file", filepath.Base(podPath))
	return nil
}

// slotFor renders the operand manifest pod for the slot a new revision is
// published into: the one the serving revision does not hold. A candidate
// not yet judged there is replaced; the serving pod is never touched.
func (in *Installer) slotFor(pod []byte) (revisions.Slot, []byte, error) {
	l, f := in.Layout, in.FS
	slots, err := l.PublishedSlots(f)
	if err != nil {
		return "", nil, err
	}
	lkg, err := l.LastKnownGood(f)
	if err != nil && !errors.Is(err, revisions.ErrNoLastKnownGood) {
		in.log.Warn("last-known-good link unusable; the lowest published revision keeps serving", "err", err)
	}
	slot := revisions.FreeSlot(slots, lkg)
	if err := l.CheckSlotFree(f, slot); err != nil {
		return "", nil, err
	}
	data, err := l.SlotManifest(pod, slot, in.NewUID())
	if err != nil {
		return "", nil, err
	}
	return slot, data, nil
}
