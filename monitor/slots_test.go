package monitor

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/revisions"
)

// publishSlot publishes revision n's operand manifest into slot s the way
// the installer does, with a new uid, stamped with the fake time.
func (e *env) publishSlot(n int, s revisions.Slot) {
	e.t.Helper()
	data, err := os.ReadFile(e.l.RevisionPodManifest(n))
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := e.l.SlotManifest(data, s, revisions.NewUID())
	if err != nil {
		e.t.Fatal(err)
	}
	e.write(e.l.PublishedSlotManifest(s), string(out))
}

// slot reads what slot s holds; nil when it is empty.
func (e *env) slot(s revisions.Slot) *revisions.PublishedSlot {
	e.t.Helper()
	slots, err := e.l.PublishedSlots(e.fs)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range slots {
		if slots[i].Slot == s {
			return &slots[i]
		}
	}
	return nil
}

func slotsMode(o *Options) { o.Publish = revisions.PublishSlots }

// slots12 is the usual start in slots mode: revision 1 good in slot a,
// revision 2 published beside it in slot b with its monitor.
func slots12(t *testing.T) *env {
	e := newEnv(t)
	e.install(1)
	e.setLKG(1)
	e.publishSlot(1, revisions.SlotA)
	e.install(2)
	e.copy(e.l.RevisionMonitorManifest(2), e.l.PublishedMonitorManifest())
	e.publishSlot(2, revisions.SlotB)
	e.serve(2)
	return e
}

// TestSlotsGoodRemovesTheOtherSlot: a good revision becomes last-known-good
// and the slot of the revision it replaces is removed, its own left as the
// installer wrote it.
func TestSlotsGoodRemovesTheOtherSlot(t *testing.T) {
	e := slots12(t)
	own := e.slot(revisions.SlotB)
	e.record(revisions.RecordStart, 2, "")
	m := e.monitor(2, slotsMode)
	if !e.stepFor(m, 10*time.Second) {
		t.Fatal("not good")
	}
	if e.lkg() != 2 || e.state(2).Outcome != revisions.OutcomeGood {
		t.Fatalf("last-known-good %d, state %+v", e.lkg(), e.state(2))
	}
	if s := e.slot(revisions.SlotA); s != nil {
		t.Fatalf("slot a still holds revision %d", s.Revision)
	}
	if s := e.slot(revisions.SlotB); s == nil || string(s.Data) != string(own.Data) {
		t.Fatalf("slot b changed: %+v", s)
	}
	if e.monitorManifestRevision() != 0 {
		t.Fatal("own monitor manifest not removed")
	}

	// A monitor that died between recording the decision and removing the
	// other slot completes the removal when restarted.
	t.Run("restart completes it", func(t *testing.T) {
		e.publishSlot(1, revisions.SlotA)
		e.copy(e.l.RevisionMonitorManifest(2), e.l.PublishedMonitorManifest())
		if !e.step(e.monitor(2, slotsMode)) {
			t.Fatal("restarted monitor of a good revision did not exit at once")
		}
		if e.slot(revisions.SlotA) != nil || e.slot(revisions.SlotB) == nil || e.monitorManifestRevision() != 0 {
			t.Fatalf("after restart: slot a %v, slot b %v, monitor %d", e.slot(revisions.SlotA), e.slot(revisions.SlotB), e.monitorManifestRevision())
		}
	})
}

// removals records the paths removed through the FS seam.
type removals struct {
	mu    sync.Mutex
	paths []string
}

func (r *removals) wrap(f revisions.FS) revisions.FS {
	remove := f.Remove
	f.Remove = func(name string) error {
		r.mu.Lock()
		r.paths = append(r.paths, name)
		r.mu.Unlock()
		return remove(name)
	}
	return f
}

func (r *removals) has(p string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.paths {
		if q == p {
			return true
		}
	}
	return false
}

// TestSlotsFallbackAnnotatesTheServingSlotInPlace: a failed revision's slot
// is removed and the serving revision's manifest gets the fallback
// annotations in place: the same file, name and uid, never removed, so the
// kubelet keeps its pod running. A retried revision comes back in the free
// slot.
func TestSlotsFallbackAnnotatesTheServingSlotInPlace(t *testing.T) {
	for _, tt := range []struct {
		name   string
		setup  func(e *env)
		reason string
	}{
		{"crash-looping", func(e *env) {
			for range DefaultCrashloopThreshold {
				e.record(revisions.RecordStart, 2, "")
				e.record(revisions.RecordExit, 2, "unknown flag: --no-such-flag")
			}
		}, revisions.ReasonCrashLooping},
		{"never started", func(*env) {}, revisions.ReasonNeverStartedUp},
		{"not ready", func(e *env) {
			e.record(revisions.RecordStart, 2, "")
			e.op.set(func(o *operand) { o.ready = 503; o.body = "[-]config failed: broken objects\n" })
		}, revisions.ReasonNotReady},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := slots12(t)
			var rm removals
			e.fs = rm.wrap(e.fs)
			serving := e.slot(revisions.SlotA)
			tt.setup(e)
			m := e.monitor(2, slotsMode)
			done := e.stepFor(m, DefaultFallbackTimeout+2*time.Second)
			if done == revisions.Retried(tt.reason) {
				t.Fatalf("done %v for %s", done, tt.reason)
			}
			if e.slot(revisions.SlotB) != nil {
				t.Fatal("the failed revision's slot is still published")
			}
			if rm.has(serving.Path) {
				t.Fatal("the serving manifest was removed on the way: the kubelet would stop its pod")
			}
			got := e.slot(revisions.SlotA)
			if got == nil || got.Revision != 1 || got.UID != serving.UID || !got.Labeled {
				t.Fatalf("serving slot after the fallback: %+v (uid was %s)", got, serving.UID)
			}
			fb, err := fallbackstatus.Parse(got.Annotations)
			if err != nil || fb == nil || fb.ForRevision != 2 || fb.Reason != tt.reason || fb.ToRevision != 1 {
				t.Fatalf("fallback annotations %+v %v", fb, err)
			}
			if !revisions.Retried(tt.reason) {
				return
			}

			// The retry publishes revision 2 into the free slot, with a new
			// uid; the serving slot keeps its fallback until the retry is decided.
			first := e.state(2).Attempts
			e.clock.Step(10 * time.Minute)
			e.step(m)
			retried := e.slot(revisions.SlotB)
			if retried == nil || retried.Revision != 2 || retried.UID == "" || retried.UID == serving.UID {
				t.Fatalf("retry published %+v", retried)
			}
			if a := e.slot(revisions.SlotA); a == nil || a.Annotations[revisions.AnnotationFallbackForRevision] != "2" {
				t.Fatalf("serving slot during the retry: %+v", a)
			}
			e.stepFor(m, DefaultFallbackTimeout+2*time.Second)
			if e.slot(revisions.SlotB) != nil {
				t.Fatal("the retried revision's slot is still published after it failed again")
			}
			a := e.slot(revisions.SlotA)
			if a.UID != serving.UID || a.Annotations[revisions.AnnotationFallbackAttempt] != strconv.Itoa(first+1) {
				t.Fatalf("serving slot after the second failure: uid %s, annotations %v", a.UID, a.Annotations)
			}
		})
	}
}

// TestSlotsFallbackWithoutServingSlot: when no slot runs the fallback
// revision, it takes the failed revision's slot.
func TestSlotsFallbackWithoutServingSlot(t *testing.T) {
	e := slots12(t)
	if err := os.Remove(e.l.PublishedSlotManifest(revisions.SlotA)); err != nil {
		t.Fatal(err)
	}
	failed := e.slot(revisions.SlotB)
	m := e.monitor(2, slotsMode)
	if !e.stepFor(m, DefaultFallbackTimeout+2*time.Second) {
		t.Fatal("not done after NeverStartedUp")
	}
	got := e.slot(revisions.SlotB)
	if got == nil || got.Revision != 1 || got.UID == failed.UID || got.Annotations[revisions.AnnotationFallbackForRevision] != "2" {
		t.Fatalf("slot b after the fallback: %+v", got)
	}
	if e.slot(revisions.SlotA) != nil {
		t.Fatal("slot a published")
	}
}

// TestSlotsBootstrapKeepsTheCandidate: with nothing to fall back to the
// failed revision stays published, as in replace mode.
func TestSlotsBootstrapKeepsTheCandidate(t *testing.T) {
	e := newEnv(t)
	e.install(1)
	e.publishSlot(1, revisions.SlotA)
	m := e.monitor(1, slotsMode)
	if !e.stepFor(m, DefaultFallbackTimeout+2*time.Second) {
		t.Fatal("not done")
	}
	if s := e.slot(revisions.SlotA); s == nil || s.Revision != 1 || len(s.Annotations[revisions.AnnotationFallbackForRevision]) != 0 {
		t.Fatalf("slot a: %+v", s)
	}
}

// TestSlotsInterruptedFallbackIsCompleted fails the removal of the failed
// revision's slot after the serving one was annotated (as a crash there
// would leave it): a restarted monitor removes it.
func TestSlotsInterruptedFallbackIsCompleted(t *testing.T) {
	e := slots12(t)
	own := e.l.PublishedSlotManifest(revisions.SlotB)
	broken := e.fs
	remove := broken.Remove
	broken.Remove = func(name string) error {
		if name == own {
			return errors.New("injected")
		}
		return remove(name)
	}
	m := e.monitor(2, slotsMode, func(o *Options) { o.FS = &broken })
	var stepErr error
	for range int(DefaultFallbackTimeout/time.Second) + 5 {
		if _, stepErr = m.Step(context.Background()); stepErr != nil {
			break
		}
		e.clock.Step(time.Second)
	}
	if stepErr == nil {
		t.Fatal("the fallback did not fail on the injected removal")
	}
	if a := e.slot(revisions.SlotA); a.Annotations[revisions.AnnotationFallbackForRevision] != "2" || e.slot(revisions.SlotB) == nil {
		t.Fatalf("before the restart: slot a %v, slot b %v", a.Annotations, e.slot(revisions.SlotB))
	}
	if !e.step(e.monitor(2, slotsMode)) {
		t.Fatal("restarted monitor did not finish")
	}
	if e.slot(revisions.SlotB) != nil {
		t.Fatal("the failed revision's slot is still published")
	}
	if a := e.slot(revisions.SlotA); a == nil || a.Annotations[revisions.AnnotationFallbackReason] != revisions.ReasonNeverStartedUp {
		t.Fatalf("slot a: %+v", a)
	}
}

// fakeMirrors is a node's mirror pods as the kubelet and the API server
// keep them: created from the manifest, never updated by the kubelet,
// patched by Annotate.
type fakeMirrors struct {
	e         *env
	mu        sync.Mutex
	pods      map[string]*corev1.Pod
	annotated int
	events    []string
}

// create mirrors the manifest now published in slot s.
func (f *fakeMirrors) create(s revisions.Slot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := f.e.slot(s)
	f.pods[f.e.l.SlotPodName(s)] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: f.e.l.SlotPodName(s) + "-node",
		UID: types.UID(revisions.NewUID()), Annotations: ps.Annotations,
		Labels: map[string]string{revisions.RevisionLabel: strconv.Itoa(ps.Revision)}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func (f *fakeMirrors) MirrorPodOf(_ context.Context, pod string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[pod]
	if !ok {
		return nil, errors.New("not found")
	}
	return p.DeepCopy(), nil
}

func (f *fakeMirrors) EmitFor(_ context.Context, pod, _, reason, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, pod+" "+reason)
	return nil
}

// Annotate stands in for the API server: it patches the pod's fallback
// annotations when its uid is uid.
func (f *fakeMirrors) Annotate(_ context.Context, pod string, uid types.UID, want map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[pod]
	if !ok || p.UID != uid {
		return nil
	}
	f.annotated++
	p.Annotations = map[string]string{}
	for k, v := range want {
		p.Annotations[k] = v
	}
	return nil
}

// TestSlotsFallbackAnnotatesTheServingMirrorPod: the kubelet keeps the
// mirror pod of a manifest changed in place as it was, so the monitor brings
// the fallback annotations onto it; Events go on the mirror pod of the slot
// they are about.
func TestSlotsFallbackAnnotatesTheServingMirrorPod(t *testing.T) {
	e := slots12(t)
	e.autoStep(mirrorRefreshLook) // the refresh waits between its looks
	mirrors := &fakeMirrors{e: e, pods: map[string]*corev1.Pod{}}
	mirrors.create(revisions.SlotA)
	mirrors.create(revisions.SlotB)
	uid := mirrors.pods["revgate"].UID
	m := e.monitor(2, slotsMode, func(o *Options) { o.Mirrors = mirrors })
	if !e.stepFor(m, DefaultFallbackTimeout+2*time.Second) {
		t.Fatal("not done after NeverStartedUp")
	}
	p, _ := mirrors.MirrorPodOf(context.Background(), "revgate")
	if mirrors.annotated != 1 || p.UID != uid || !sameFallback(p.Annotations, e.slot(revisions.SlotA).Annotations) {
		t.Fatalf("annotated %d times; mirror pod %s annotations %v", mirrors.annotated, p.UID, p.Annotations)
	}
	want := "revgate " + EventFallbackToLastKnownGood
	found := false
	for _, ev := range mirrors.events {
		found = found || ev == want
	}
	if !found {
		t.Fatalf("events %v, want %q", mirrors.events, want)
	}
}
