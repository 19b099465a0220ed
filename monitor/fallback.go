package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/internal/doubling"
	"github.com/revgate/revgate/revisions"
)

// fallbackTarget is the revision to put back: the last-known-good one, or
// when there is no usable link the highest older revision whose operand
// manifest exists, or 0 when there is none (bootstrap).
func (m *Monitor) fallbackTarget(lst revisions.Listing) int {
	n := m.opts.Revision
	lkg, err := m.opts.Layout.LastKnownGood(m.fs)
	switch {
	case err == nil && lkg != n:
		return lkg
	case err != nil && !errors.Is(err, revisions.ErrNoLastKnownGood):
		m.log.Warn("last-known-good link unusable; falling back to the previous revision", "err", err)
	}
	for i := len(lst.Revisions) - 1; i >= 0; i-- {
		r := lst.Revisions[i]
		if r >= n {
			continue
		}
		if _, err := m.fs.Stat(m.opts.Layout.RevisionPodManifest(r)); err == nil {
			return r
		}
	}
	return 0
}

// publishFallback puts the fallback recorded in the state file for this
// revision in place: the target's operand manifest with the fallback
// annotations. decided says the failure was just decided (the published
// manifest is then this revision's); otherwise a fallback already in place is
// left alone. Call it under the lock.
func (m *Monitor) publishFallback(ctx context.Context, decided bool) error {
	n := m.opts.Revision
	st, err := revisions.LoadState(m.fs, m.opts.Layout.StateFile())
	if err != nil {
		return err
	}
	rs := st.Revisions[n]
	if rs == nil || len(rs.Fallbacks) == 0 {
		return fmt.Errorf("no recorded fallback of revision %d", n)
	}
	rec := rs.Fallbacks[len(rs.Fallbacks)-1]
	if rec.To == 0 {
		if decided {
			m.log.Warn("no earlier revision to fall back to; the failed revision stays published", "reason", rec.Reason)
			m.event(ctx, corev1.EventTypeWarning, EventNoFallbackRevision,
				fmt.Sprintf("revision %d failed with %s and there is no earlier revision to fall back to: %s", n, rec.Reason, rec.Message))
		}
		return nil
	}
	if !decided && m.fallbackInPlace() {
		return nil // in place, or replaced by someone else: not ours to touch
	}
	src, err := m.fs.ReadFile(m.opts.Layout.RevisionPodManifest(rec.To))
	if err != nil {
		return fmt.Errorf("read operand manifest of fallback revision %d: %w", rec.To, err)
	}
	fb := &fallbackstatus.Fallback{ForRevision: n, Reason: rec.Reason, Message: rec.Message, Time: rec.Time,
		Attempt: rec.Attempt, ToRevision: rec.To, NextRetry: rs.NextRetry}
	data, err := annotateManifest(src, fb)
	if err != nil {
		return fmt.Errorf("annotate operand manifest of revision %d: %w", rec.To, err)
	}
	if m.slots() {
		return m.publishSlotFallback(ctx, rec, fb, data)
	}
	if err := m.fs.Publish(m.opts.Layout.PublishedPodManifest(), data); err != nil {
		return fmt.Errorf("publish fallback revision %d: %w", rec.To, err)
	}
	m.log.Warn("published the fallback revision", "reason", rec.Reason, "fallback_to", rec.To)
	m.event(ctx, corev1.EventTypeWarning, EventFallbackToLastKnownGood, fb.Summary()+": "+rec.Message)
	return nil
}

// annotateManifest returns the pod manifest src with the fallback's
// annotations set (and stale ones of an earlier fallback removed) and a fresh
// metadata.uid. The manifest goes through the typed Pod so that everything
// else is kept.
func annotateManifest(src []byte, fb *fallbackstatus.Fallback) ([]byte, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal(src, &pod); err != nil {
		return nil, fmt.Errorf("parse pod manifest: %w", err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for _, k := range fallbackstatus.Keys {
		delete(pod.Annotations, k)
	}
	for k, v := range fb.Annotations() {
		pod.Annotations[k] = v
	}
	pod.UID = freshUID()
	out, err := yaml.Marshal(&pod)
	if err != nil {
		return nil, fmt.Errorf("encode pod manifest: %w", err)
	}
	return out, nil
}

// freshUID is a new random metadata.uid for a manifest put back, as
// OpenShift's startup monitor sets one. The kubelet names a static pod by its
// uid (a hash of the file when it has none), and the manifest put back is
// often the very file it ran before: under the old uid, the kubelet does not
// stop the failed pod and start this one as it stops and starts two pods.
func freshUID() types.UID { return types.UID(revisions.NewUID()) }

// RetryDelay is the wait before rolling a failed revision out again after
// its attempt-th rollout failed: the attempt-th delay of doubling.New,
// that is initial, doubling with each attempt, capped at max (10m, 20m,
// 40m, ... 6h by default). It depends on the attempt alone, so a restarted
// monitor computes the same schedule from the attempts in the state file;
// the time of the retry is persisted there too once decided.
func RetryDelay(initial, max time.Duration, attempt int) time.Duration {
	b := doubling.New(initial, max, nil)
	d := b.NextBackOff()
	// Once at max the interval stays there: stop stepping, whatever the
	// attempt count read from the state file.
	for i := 1; i < attempt && d < max; i++ {
		d = b.NextBackOff()
	}
	return d
}

// MirrorPodName is the name the kubelet gives the mirror pod of the operand
// manifest of revision rev: <pod name>-<node name>.
func MirrorPodName(fs revisions.FS, l revisions.Layout, rev int, node string) (string, error) {
	data, err := fs.ReadFile(l.RevisionPodManifest(rev))
	if err != nil {
		return "", fmt.Errorf("read operand manifest of revision %d: %w", rev, err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return "", fmt.Errorf("parse operand manifest of revision %d: %w", rev, err)
	}
	if pod.Name == "" {
		return "", fmt.Errorf("operand manifest of revision %d has no metadata.name", rev)
	}
	return pod.Name + "-" + node, nil
}
