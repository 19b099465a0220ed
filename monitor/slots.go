package monitor

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/revisions"
)

// The slots publish mode (revisions.PublishSlots): the installer publishes
// a new revision into the slot the serving revision does not hold, and both
// pods run side by side. The monitor then
//   - watches its revision in whichever slot holds it;
//   - on good, removes the other slot's manifest: its revision is ready and
//     has joined the gateway's ports, so nothing stops serving;
//   - on a fallback to a revision that a slot serves, annotates that slot's
//     manifest in place (same metadata.uid: the kubelet updates the running
//     pod instead of replacing it) and only then removes its own slot;
//     when no slot serves the fallback revision, it publishes it into its
//     own slot instead;
//   - on a retry, publishes its revision into the free slot again.

// slots reports whether the monitor runs in slots mode.
func (m *Monitor) slots() bool { return m.opts.Publish == revisions.PublishSlots }

// observeSlots is observe in slots mode: the published revision is the
// newest one in a slot, the one being rolled out.
func (m *Monitor) observeSlots() (observation, error) {
	l := m.opts.Layout
	lst, err := l.List(m.fs)
	if err != nil {
		return observation{}, err
	}
	o := observation{rev: m.opts.Revision, highest: lst.Highest()}
	slots, err := l.PublishedSlots(m.fs)
	if err != nil {
		return observation{}, err
	}
	for _, s := range slots {
		rev, ok := m.slotRevision(s)
		if !ok {
			m.log.Debug("published operand manifest unreadable", "slot", s.Slot, "err", s.Err)
			continue
		}
		o.published = max(o.published, rev)
		if rev == m.opts.Revision && o.ownPath == "" {
			o.ownPath = s.Path
			m.eventPod = l.SlotPodName(s.Slot)
		}
	}
	return o, nil
}

// slotRevision is the revision a slot's manifest runs. A manifest that does
// not parse has no revision label to read, but it is this revision's when it
// is byte for byte the revision's operand manifest (the installer publishes
// such a manifest unchanged, as it cannot give it a slot's name).
func (m *Monitor) slotRevision(s revisions.PublishedSlot) (int, bool) {
	if s.Err == nil {
		return s.Revision, true
	}
	own, err := m.fs.ReadFile(m.opts.Layout.RevisionPodManifest(m.opts.Revision))
	if err == nil && bytes.Equal(s.Data, own) {
		return m.opts.Revision, true
	}
	return 0, false
}

// ownSlots are the published slots running this revision.
func (m *Monitor) ownSlots(slots []revisions.PublishedSlot) []revisions.PublishedSlot {
	var out []revisions.PublishedSlot
	for _, s := range slots {
		if rev, ok := m.slotRevision(s); ok && rev == m.opts.Revision {
			out = append(out, s)
		}
	}
	return out
}

// fallbackInPlace reports whether the fallback of this revision needs no
// more writing: this revision is published nowhere any more (and something
// else is published: the fallback, or a newer revision not ours to touch).
func (m *Monitor) fallbackInPlace() bool {
	if !m.slots() {
		pub, err := m.opts.Layout.PublishedRevision(m.fs)
		return err == nil && pub != m.opts.Revision
	}
	slots, err := m.opts.Layout.PublishedSlots(m.fs)
	if err != nil {
		return false // publishSlotFallback reads them again and fails
	}
	return len(slots) > 0 && len(m.ownSlots(slots)) == 0
}

// publishSlotFallback puts the fallback in place in slots mode; data is
// the fallback revision's operand manifest with the fallback's annotations.
// Call it under the lock.
func (m *Monitor) publishSlotFallback(ctx context.Context, rec revisions.Fallback, fb *fallbackstatus.Fallback, data []byte) error {
	l := m.opts.Layout
	slots, err := l.PublishedSlots(m.fs)
	if err != nil {
		return err
	}
	own := m.ownSlots(slots)
	var serving *revisions.PublishedSlot
	for i, s := range slots {
		if rev, ok := m.slotRevision(s); ok && rev == rec.To {
			serving = &slots[i]
		}
	}
	if serving == nil {
		// No slot serves the fallback revision: it takes this revision's
		// slot, and the other slot, if any, is left as it is.
		slot := revisions.FreeSlot(slots, rec.To)
		if len(own) > 0 {
			slot = own[0].Slot
		} else if err := l.CheckSlotFree(m.fs, slot); err != nil {
			return err
		}
		out, err := l.SlotManifest(data, slot, revisions.NewUID())
		if err != nil {
			return fmt.Errorf("render fallback revision %d for slot %s: %w", rec.To, slot, err)
		}
		if err := m.fs.Publish(l.PublishedSlotManifest(slot), out); err != nil {
			return fmt.Errorf("publish fallback revision %d into slot %s: %w", rec.To, slot, err)
		}
		m.eventPod = l.SlotPodName(slot)
		m.log.Warn("published the fallback revision into the failed revision's slot", "reason", rec.Reason, "fallback_to", rec.To, "slot", slot)
		m.event(ctx, corev1.EventTypeWarning, EventFallbackToLastKnownGood, fb.Summary()+": "+rec.Message)
		return nil
	}

	// The serving pod keeps running: its manifest changes in place (a
	// rename over it, never a removal) and keeps its uid, which the kubelet
	// takes as an update of the running pod. A manifest published in replace
	// mode has no uid yet: it gets one, and the kubelet starts it again once.
	uid := serving.UID
	if uid == "" {
		uid = revisions.NewUID()
		m.log.Warn("the serving manifest has no metadata.uid (published in replace mode); annotating it restarts its pod once", "slot", serving.Slot)
	}
	out, err := l.SlotManifest(data, serving.Slot, uid)
	if err != nil {
		return fmt.Errorf("render fallback revision %d for slot %s: %w", rec.To, serving.Slot, err)
	}
	if !bytes.Equal(out, serving.Data) {
		if err := m.fs.WriteFile(serving.Path, out, 0o644); err != nil {
			return fmt.Errorf("annotate fallback revision %d in slot %s: %w", rec.To, serving.Slot, err)
		}
	}
	pod := l.SlotPodName(serving.Slot)
	m.refresh = &mirrorRefresh{pod: pod, annotations: fb.Annotations()}
	// Only now that the serving manifest says why does the failed
	// revision's pod go: a crash in between leaves both, and the restarted
	// monitor completes the fallback.
	for _, s := range own {
		if err := m.fs.RemoveFile(s.Path); err != nil {
			return fmt.Errorf("remove failed revision %d from slot %s: %w", m.opts.Revision, s.Slot, err)
		}
	}
	m.eventPod = pod
	m.log.Warn("removed the failed revision; the serving revision carries the fallback", "reason", rec.Reason, "fallback_to", rec.To, "slot", serving.Slot)
	m.event(ctx, corev1.EventTypeWarning, EventFallbackToLastKnownGood, fb.Summary()+": "+rec.Message)
	return nil
}

// publishRetry publishes this revision's operand manifest data again: over
// the one manifest in replace mode, into the free slot in slots mode. Call
// it under the lock.
func (m *Monitor) publishRetry(data []byte) error {
	l := m.opts.Layout
	if !m.slots() {
		return m.fs.Publish(l.PublishedPodManifest(), data)
	}
	slots, err := l.PublishedSlots(m.fs)
	if err != nil {
		return err
	}
	lkg, _ := l.LastKnownGood(m.fs)
	slot := revisions.FreeSlot(slots, lkg)
	if err := l.CheckSlotFree(m.fs, slot); err != nil {
		return err
	}
	out, err := l.SlotManifest(data, slot, revisions.NewUID())
	if err != nil {
		// Published as it is: the kubelet cannot run it either, and this
		// monitor recognises it by its bytes and decides again.
		m.log.Warn("operand manifest does not parse; publishing it into the slot unchanged", "slot", slot, "err", err)
		out = data
	}
	m.eventPod = l.SlotPodName(slot)
	return m.fs.Publish(l.PublishedSlotManifest(slot), out)
}

// removeOtherSlots removes, in slots mode, the manifests of the slots that
// do not run this revision, once this revision is good. Nothing is removed
// while no slot runs this revision. Call it under the lock.
func (m *Monitor) removeOtherSlots() error {
	if !m.slots() {
		return nil
	}
	slots, err := m.opts.Layout.PublishedSlots(m.fs)
	if err != nil {
		return err
	}
	if len(m.ownSlots(slots)) == 0 {
		return nil
	}
	for _, s := range slots {
		if rev, ok := m.slotRevision(s); ok && rev == m.opts.Revision {
			continue
		}
		if err := m.fs.RemoveFile(s.Path); err != nil {
			return fmt.Errorf("remove the replaced revision's slot %s: %w", s.Slot, err)
		}
		m.log.Info("removed the replaced revision's pod", "slot", s.Slot, "its_revision", s.Revision)
	}
	return nil
}

// hasMirrorPods reports whether the mirror-pod check runs.
func (m *Monitor) hasMirrorPods() bool {
	if m.slots() && m.opts.Mirrors != nil {
		return true
	}
	return m.opts.Pods != nil
}

// mirrorPod returns the mirror pod of the static pod running this revision.
func (m *Monitor) mirrorPod(ctx context.Context) (*corev1.Pod, error) {
	if m.slots() && m.opts.Mirrors != nil {
		return m.opts.Mirrors.MirrorPodOf(ctx, m.eventPod)
	}
	return m.opts.Pods.MirrorPod(ctx)
}

// Bringing the fallback annotations onto the mirror pod of a manifest
// annotated in place: how long to try, how long to give the API server and
// the kubelet after an attempt before the next one, and how often to look
// meanwhile.
const (
	mirrorRefreshTimeout = 30 * time.Second
	mirrorRefreshRetry   = 3 * time.Second
	mirrorRefreshLook    = 200 * time.Millisecond
)

// mirrorRefresh is a mirror pod that must come to carry annotations.
type mirrorRefresh struct {
	pod         string
	annotations map[string]string
}

// refreshMirror makes the mirror pod of a manifest annotated in place carry
// its fallback annotations: the kubelet updates the running static pod but
// keeps the mirror pod as it was created (MirrorPods.Annotate). It gives up
// after mirrorRefreshTimeout; the annotations on disk stand either way, and
// the kubelet mirrors them whenever it creates the mirror pod again.
func (m *Monitor) refreshMirror(ctx context.Context) {
	r := m.refresh
	m.refresh = nil
	if r == nil || m.opts.Mirrors == nil {
		return
	}
	clk := m.opts.Clock
	deadline := clk.Now().Add(mirrorRefreshTimeout)
	var tried time.Time
	for {
		pod, err := m.opts.Mirrors.MirrorPodOf(ctx, r.pod)
		switch {
		case err == nil && sameFallback(pod.Annotations, r.annotations):
			m.log.Info("the serving mirror pod shows the fallback", "pod", pod.Name)
			return
		case err == nil && (tried.IsZero() || !clk.Now().Before(tried.Add(mirrorRefreshRetry))):
			if err := m.opts.Mirrors.Annotate(ctx, r.pod, types.UID(pod.UID), r.annotations); err != nil {
				m.log.Warn("annotating the serving mirror pod failed", "err", err)
			}
			tried = clk.Now()
		}
		if !clk.Now().Before(deadline) {
			m.log.Warn("the serving mirror pod does not show the fallback yet; its manifest does", "pod", r.pod)
			return
		}
		t := clk.NewTimer(mirrorRefreshLook)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// sameFallback reports whether have carries exactly the fallback
// annotations of want.
func sameFallback(have, want map[string]string) bool {
	pick := func(a map[string]string) map[string]string {
		out := map[string]string{}
		for _, k := range fallbackstatus.Keys {
			if v, ok := a[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	return maps.Equal(pick(have), pick(want))
}
