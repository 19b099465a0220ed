package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/revisions"
)

// Event reasons about revisions, recorded on the operand's mirror pod.
const (
	// EventRevisionFallback: the startup monitor fell back from the revision
	// holding the current snapshot; the controller holds the snapshot back.
	EventRevisionFallback = "RevisionFallback"
	// EventRevisionReinstalled: the monitor did not roll a failed revision
	// out again in time; the controller installed its snapshot again.
	EventRevisionReinstalled = "RevisionReinstalled"
)

// errStale aborts an install whose comparison was made against a revision
// that is no longer the highest.
var errStale = errors.New("another revision was installed meanwhile")

// snapshotSource hands a rendered snapshot to the installer.
type snapshotSource struct{ cfg *installer.Config }

// Load returns the rendered configuration.
func (s snapshotSource) Load(context.Context) (*installer.Config, error) { return s.cfg, nil }

var _ installer.Source = snapshotSource{}

// reconcileRevision installs the snapshot unless the highest installed
// revision holds it already; when it does, it respects the monitor's
// verdict on that revision.
func (c *Controller) reconcileRevision(ctx context.Context, snap *Snapshot) error {
	l := c.opts.Layout
	listing, err := l.List(c.fs)
	if err != nil {
		return err
	}
	highest := listing.Highest()
	for n := range c.digests {
		if !listing.Has(n) {
			delete(c.digests, n) // pruned
		}
	}
	if highest > 0 {
		same, err := c.holds(highest, snap)
		if err != nil {
			return err
		}
		if same {
			return c.installed(ctx, highest, snap)
		}
	}
	return c.install(ctx, highest, snap, "")
}

// holds reports whether revision n holds the snapshot: the same routing
// structure (every file but the EndpointSlices) and the same pods.
func (c *Controller) holds(n int, snap *Snapshot) (bool, error) {
	d, ok := c.digests[n]
	if !ok {
		var err error
		if d, err = revisionDigest(c.fs, c.opts.Layout.RevisionDir(n)); err != nil {
			return false, err
		}
		c.digests[n] = d
	}
	if d != snap.Digest {
		return false, nil
	}
	return c.samePods(n)
}

// samePods reports whether the pods of revision n are what this
// controller renders: the manifests rendered again for n, at the time
// recorded in them, are byte for byte the installed ones.
func (c *Controller) samePods(n int) (bool, error) {
	l := c.opts.Layout
	for _, p := range []struct {
		path   string
		render func(time.Time) *corev1.Pod
	}{
		{l.RevisionPodManifest(n), func(t time.Time) *corev1.Pod { return installer.OperandPod(l, n, c.opts.Render, t) }},
		{l.RevisionMonitorManifest(n), func(t time.Time) *corev1.Pod { return installer.MonitorPod(l, n, c.opts.Render, t) }},
	} {
		data, err := c.fs.ReadFile(p.path)
		if err != nil {
			return false, nil // an unreadable revision is not ours to keep
		}
		var meta struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return false, nil
		}
		at, err := time.Parse(time.RFC3339, meta.Metadata.Annotations[revisions.AnnotationInstalledAt])
		if err != nil {
			return false, nil
		}
		want, err := installer.Marshal(p.render(at))
		if err != nil {
			return false, err
		}
		if !bytes.Equal(want, data) {
			return false, nil
		}
	}
	return true, nil
}

// install installs the snapshot as the next revision, unless the rollout
// says to wait; why is logged and recorded ("" for a new snapshot).
func (c *Controller) install(ctx context.Context, highest int, snap *Snapshot, why string) error {
	if ok, err := c.mayInstall(ctx, snap); !ok || err != nil {
		return err
	}
	in := c.installer(highest, snap)
	start := c.clock.Now()
	res, err := in.Run(ctx)
	if errors.Is(err, errStale) {
		c.log.Info("revisions changed while rendering; comparing again", "err", err)
		c.structure.Trigger()
		return nil
	}
	if err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	c.digests[res.Revision] = snap.Digest
	c.log.Info("snapshot installed", "revision", res.Revision, "digest", snap.Digest, "why", why,
		"files", len(configFiles(snap.Config)), "render", snap.RenderTime.Round(time.Millisecond), "install", c.clock.Since(start).Round(time.Millisecond))
	return nil
}

// publishWritten publishes revision n, which holds the snapshot and was
// written whole by an install that did not publish it (the controller was
// killed in between): no new revision is cut for it.
func (c *Controller) publishWritten(ctx context.Context, n int, snap *Snapshot) error {
	if ok, err := c.mayInstall(ctx, snap); !ok || err != nil {
		return err
	}
	_, err := c.installer(n, snap).PublishWritten(ctx, n)
	if errors.Is(err, errStale) || errors.Is(err, installer.ErrNotWrittenUnpublished) {
		c.log.Info("revisions changed meanwhile; comparing again", "revision", n, "err", err)
		c.structure.Trigger()
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish revision %d: %w", n, err)
	}
	c.log.Info("snapshot published", "revision", n, "digest", snap.Digest, "why", "the revision was written but never published")
	return nil
}

// mayInstall asks the rollout whether the snapshot may reach this node now;
// when not, the snapshot is compared again when the rollout says.
func (c *Controller) mayInstall(ctx context.Context, snap *Snapshot) (bool, error) {
	ok, after, err := c.rollout.MayInstall(ctx, snap.Digest)
	if err != nil {
		return false, fmt.Errorf("ask the rollout: %w", err)
	}
	if !ok {
		// The rollout logs why, once per reason.
		c.log.Debug("rollout holds the snapshot back", "digest", snap.Digest, "retry_after", after)
		c.structure.TriggerAfter(after)
	}
	return ok, nil
}

// installer is the installer of snapshot snap, for an install compared
// with the highest revision highest.
func (c *Controller) installer(highest int, snap *Snapshot) *installer.Installer {
	return &installer.Installer{
		Layout:      c.opts.Layout,
		FS:          c.fs,
		Source:      snapshotSource{snap.Config},
		Render:      c.opts.Render,
		LockTimeout: c.opts.LockTimeout,
		Events:      targetSink{c},
		Clock:       c.clock,
		Logger:      c.baseLog,
		Precondition: func(h int) error {
			if h != highest {
				return fmt.Errorf("highest revision is %d, compared with %d: %w", h, highest, errStale)
			}
			return nil
		},
	}
}

// installed handles a snapshot that revision n holds already: it reports
// the monitor's verdict to the rollout and, when the monitor fell back from
// n, holds the snapshot back until the monitor's retry time (for good when
// the failure is not retried). When the monitor has not rolled n out again
// RetryGrace after its retry time, the snapshot is installed again.
func (c *Controller) installed(ctx context.Context, n int, snap *Snapshot) error {
	state, err := revisions.LoadState(c.fs, c.opts.Layout.StateFile())
	if err != nil {
		return err
	}
	rs := state.Revisions[n]
	if rs == nil {
		return nil
	}
	c.reportVerdict(ctx, n, snap.Digest, rs)
	if rs.Outcome == revisions.OutcomeInstalled && !c.rolledOut(n) {
		// Written but never published: an install was interrupted between
		// the two (the installer leaves a complete revision), and no monitor
		// will ever look at it.
		return c.publishWritten(ctx, n, snap)
	}
	if rs.Outcome != revisions.OutcomeFailed {
		return nil
	}
	now := c.clock.Now()
	switch {
	case rs.NextRetry == nil:
		c.fallbackEvent(n, rs, "the same configuration is not installed again until it changes")
		return nil
	case now.Before(rs.NextRetry.Add(c.opts.RetryGrace)):
		c.fallbackEvent(n, rs, fmt.Sprintf("the startup monitor rolls it out again at %s", rs.NextRetry.UTC().Format(time.RFC3339)))
		c.structure.TriggerAfter(rs.NextRetry.Add(c.opts.RetryGrace).Sub(now))
		return nil
	}
	msg := fmt.Sprintf("revision %d failed with %s and was not rolled out again by %s; installing its configuration again", n, rs.Reason, rs.NextRetry.UTC().Format(time.RFC3339))
	c.targetEvent(corev1.EventTypeNormal, EventRevisionReinstalled, msg)
	return c.install(ctx, n, snap, msg)
}

// rolledOut reports whether revision n's operand or monitor manifest is
// published (the monitor's manifest goes first, and stays until decided).
func (c *Controller) rolledOut(n int) bool {
	l := c.opts.Layout
	for _, p := range []string{l.PublishedPodManifest(), l.PublishedMonitorManifest()} {
		if r, err := revisions.ReadRevisionLabel(c.fs, p); err == nil && r == n {
			return true
		}
	}
	return false
}

// fallbackEvent records, once per revision and attempt, that the monitor
// fell back from revision n and what the controller does about it.
func (c *Controller) fallbackEvent(n int, rs *revisions.RevisionState, then string) {
	key := [2]int{n, rs.Attempts}
	if c.held[key] {
		return
	}
	c.held[key] = true
	serving := "no revision"
	if p, err := c.opts.Layout.ServingRevision(c.fs); err == nil {
		serving = fmt.Sprintf("revision %d", p)
	}
	msg := fmt.Sprintf("revision %d failed with %s: %s; the gateway serves %s; %s", n, rs.Reason, rs.Message, serving, then)
	c.log.Warn("startup monitor fell back; snapshot held back", "revision", n, "reason", rs.Reason, "attempt", rs.Attempts, "then", then)
	c.targetEvent(corev1.EventTypeWarning, EventRevisionFallback, msg)
}

// reportVerdict hands a decided verdict to the rollout, once.
func (c *Controller) reportVerdict(ctx context.Context, n int, digest string, rs *revisions.RevisionState) {
	if rs.Outcome != revisions.OutcomeGood && rs.Outcome != revisions.OutcomeFailed {
		return
	}
	key := verdictKey{revision: n, attempt: rs.Attempts, outcome: rs.Outcome}
	if c.verdicts[key] {
		return
	}
	v := Verdict{Revision: n, Outcome: rs.Outcome, Reason: rs.Reason, Message: rs.Message, Attempt: rs.Attempts}
	if err := c.rollout.Report(ctx, digest, v); err != nil {
		c.log.Warn("reporting the verdict to the rollout failed", "revision", n, "err", err)
		return
	}
	c.verdicts[key] = true
}
