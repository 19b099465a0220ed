package monitor

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/revisions"
)

func (e *env) serve(revs ...int) { e.op.set(func(o *operand) { o.revs = revs }) }

// node12 is the usual start: revision 1 good, revision 2 installed and
// published with its monitor.
func node12(t *testing.T) *env {
	e := newEnv(t)
	e.install(1)
	e.setLKG(1)
	e.install(2)
	e.publish(2, true)
	e.serve(2)
	return e
}

func TestGoodRevision(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	m := e.monitor(2)
	for i := 1; i < DefaultReadySuccesses; i++ {
		if e.step(m) {
			t.Fatalf("done after %d passes, want %d in a row", i, DefaultReadySuccesses)
		}
		e.clock.Step(time.Second)
	}
	if !e.step(m) {
		t.Fatal("not done after enough passes")
	}
	if got := e.lkg(); got != 2 {
		t.Fatalf("last-known-good = %d, want 2", got)
	}
	rs := e.state(2)
	if rs == nil || rs.Outcome != revisions.OutcomeGood || rs.NextRetry != nil || rs.DecidedAt.IsZero() {
		t.Fatalf("state = %+v", rs)
	}
	if _, err := os.Stat(e.l.PublishedMonitorManifest()); !os.IsNotExist(err) {
		t.Fatalf("own monitor manifest not removed: %v", err)
	}
	if rev, fb, _ := e.published(); rev != 2 || fb != nil {
		t.Fatalf("published = %d %+v, want revision 2 without fallback", rev, fb)
	}

	t.Run("idempotent restart", func(t *testing.T) {
		e.publish(2, true) // the kubelet started the monitor pod again before the file went
		before, _ := os.ReadFile(e.l.StateFile())
		m := e.monitor(2)
		if !e.step(m) {
			t.Fatal("restarted monitor of a good revision did not exit at once")
		}
		if e.monitorManifestRevision() != 0 {
			t.Fatal("own monitor manifest not removed on restart")
		}
		after, _ := os.ReadFile(e.l.StateFile())
		if !bytes.Equal(before, after) {
			t.Fatalf("state changed on an idempotent restart:\n%s\n%s", before, after)
		}
	})
}

func TestReadySuccessesMustBeInARow(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	m := e.monitor(2)
	e.step(m)
	e.step(m)
	e.op.set(func(o *operand) { o.ready = 503; o.body = "[-]config failed: loading\n" })
	if e.step(m) {
		t.Fatal("done on a red readyz")
	}
	e.op.set(func(o *operand) { o.ready = 200; o.body = "" })
	if first, second := e.step(m), e.step(m); first || second {
		t.Fatal("done before three passes in a row after a red one")
	}
	if !e.step(m) {
		t.Fatal("not done after three passes in a row")
	}
}

func TestRevisionMismatchWaitsAndNeverFallsBack(t *testing.T) {
	e := newEnv(t)
	e.install(1)
	e.setLKG(1)
	e.install(2)
	e.publish(1, false) // the installer has not published revision 2's operand yet
	e.copy(e.l.RevisionMonitorManifest(2), e.l.PublishedMonitorManifest())
	e.serve(1)
	_, _, before := e.published()
	m := e.monitor(2)
	if e.stepFor(m, 3*DefaultFallbackTimeout) {
		t.Fatal("monitor finished while another revision is published")
	}
	_, _, after := e.published()
	if !bytes.Equal(before, after) {
		t.Fatal("published operand manifest changed")
	}
	if rs := e.state(2); rs != nil {
		t.Fatalf("state recorded for a revision never published: %+v", rs)
	}
	if e.monitorManifestRevision() != 2 {
		t.Fatal("own monitor manifest removed while waiting")
	}

	// Now revision 2 is published: the timeout starts only now.
	e.publish(2, false)
	e.serve(2)
	e.record(revisions.RecordStart, 2, "")
	if !e.stepFor(m, 10*time.Second) {
		t.Fatal("not good once published")
	}
	if e.lkg() != 2 {
		t.Fatal("last-known-good not moved")
	}
}

// failure runs revision 2 into a fallback with the operand set up by setup
// and returns when the monitor decided.
func failure(t *testing.T, e *env, setup func(), mod ...func(*Options)) (*Monitor, bool) {
	t.Helper()
	setup()
	m := e.monitor(2, mod...)
	start := e.clock.Now()
	done := e.stepFor(m, DefaultFallbackTimeout+5*time.Second)
	if rs := e.state(2); rs == nil || rs.Outcome != revisions.OutcomeFailed {
		t.Fatalf("no failure recorded after %s: %+v", e.clock.Now().Sub(start), rs)
	}
	return m, done
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(e *env)
		reason      string
		msg         []string
		retried     bool
		beforeTimer bool // decided before the fallback timeout
	}{
		{
			name:   "never started up",
			setup:  func(e *env) {},
			reason: revisions.ReasonNeverStartedUp,
			msg:    []string{"no start record"},
		},
		{
			name: "crash-looping fast path",
			setup: func(e *env) {
				for i := 0; i < DefaultCrashloopThreshold; i++ {
					e.record(revisions.RecordStart, 2, "")
					e.record(revisions.RecordExit, 2, "load revision: bad listener 'x'")
				}
			},
			reason:      revisions.ReasonCrashLooping,
			msg:         []string{"started 3 times", "bad listener 'x'"},
			beforeTimer: true,
		},
		{
			name: "crash-looping at the timeout",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
				e.record(revisions.RecordExit, 2, "panic: boom")
				e.record(revisions.RecordStart, 2, "")
				e.op.set(func(o *operand) { o.health = 500 })
			},
			reason: revisions.ReasonCrashLooping,
			msg:    []string{"started 2 times", "panic: boom"},
		},
		{
			name: "unhealthy",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
				e.op.set(func(o *operand) { o.health = 500 })
			},
			reason:  revisions.ReasonUnhealthy,
			msg:     []string{"/healthz answered 500"},
			retried: true,
		},
		{
			name: "unreachable",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
				e.op.set(func(o *operand) { o.url = "http://127.0.0.1:1" })
			},
			reason:  revisions.ReasonUnhealthy,
			msg:     []string{"unreachable"},
			retried: true,
		},
		{
			name: "not ready names the failing checks",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
				e.op.set(func(o *operand) {
					o.ready = 503
					o.body = "[+]ping ok\n[-]config failed: ingress default/web: service missing\n[-]dependency/upstream-web failed: connection refused\nreadyz check failed\n"
				})
			},
			reason:  revisions.ReasonNotReady,
			msg:     []string{"[-]config failed: ingress default/web: service missing", "[-]dependency/upstream-web failed"},
			retried: true,
		},
		{
			name: "dependency unhealthy",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
				e.op.set(func(o *operand) {
					o.ready = 503
					o.body = "[+]ping ok\n[-]dependency/upstream-web failed: connection refused\n[-]dependency/etcd failed: timeout\n"
				})
			},
			reason:  revisions.ReasonDependencyUnhealthy,
			msg:     []string{"dependency/upstream-web", "dependency/etcd"},
			retried: true,
		},
		{
			name: "answers of another revision are ignored",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
				e.serve(1)
			},
			reason:  revisions.ReasonUnhealthy,
			msg:     []string{"answered by revision 1 (pid 1001), not by revision 2"},
			retried: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := node12(t)
			if tt.name == "unreachable" {
				// probe a closed port instead of the operand
				tt.setup = func(e *env) { e.record(revisions.RecordStart, 2, "") }
				mod := func(o *Options) { o.HealthzURL = "http://127.0.0.1:1/healthz" }
				_, done := failure(t, e, func() { tt.setup(e) }, mod)
				checkFailure(t, e, done, tt.reason, tt.msg, tt.retried)
				return
			}
			start := e.clock.Now()
			_, done := failure(t, e, func() { tt.setup(e) })
			decidedAfter := e.clock.Now().Sub(start)
			if tt.beforeTimer != (decidedAfter < DefaultFallbackTimeout) {
				t.Errorf("decided after %s; want before the timeout: %v", decidedAfter, tt.beforeTimer)
			}
			checkFailure(t, e, done, tt.reason, tt.msg, tt.retried)
		})
	}
}

func checkFailure(t *testing.T, e *env, done bool, reason string, msgs []string, retried bool) {
	t.Helper()
	rs := e.state(2)
	if rs.Reason != reason {
		t.Fatalf("reason = %s (%s), want %s", rs.Reason, rs.Message, reason)
	}
	for _, want := range msgs {
		if !strings.Contains(rs.Message, want) {
			t.Errorf("message %q lacks %q", rs.Message, want)
		}
	}
	rev, fb, data := e.published()
	if rev != 1 || fb == nil {
		t.Fatalf("published revision %d with fallback %+v, want revision 1 annotated", rev, fb)
	}
	if fb.ForRevision != 2 || fb.Reason != reason || fb.Message != rs.Message || fb.ToRevision != 1 || fb.Attempt != 1 || !fb.Time.Equal(rs.DecidedAt) {
		t.Errorf("annotations = %+v", fb)
	}
	if !bytes.Contains(data, []byte("--revision-dir=/etc/kubernetes/static-pod-resources/revgate-pod-1")) {
		t.Errorf("fallback manifest lost its spec:\n%s", data)
	}
	if len(rs.Fallbacks) != 1 || rs.Fallbacks[0].To != 1 || rs.Fallbacks[0].Reason != reason {
		t.Errorf("fallback history = %+v", rs.Fallbacks)
	}
	if e.lkg() != 1 {
		t.Errorf("last-known-good moved to %d", e.lkg())
	}
	if retried {
		want := rs.DecidedAt.Add(10 * time.Minute)
		if rs.NextRetry == nil || !rs.NextRetry.Equal(want) {
			t.Errorf("next retry = %v, want %v", rs.NextRetry, want)
		}
		if fb.NextRetry == nil || !fb.NextRetry.Equal(want) {
			t.Errorf("next-retry annotation = %v, want %v", fb.NextRetry, want)
		}
		if done || e.monitorManifestRevision() != 2 {
			t.Errorf("a monitor with a retry pending must keep running and keep its manifest (done=%v)", done)
		}
		return
	}
	if rs.NextRetry != nil || fb.NextRetry != nil {
		t.Errorf("%s must not be retried: %v %v", reason, rs.NextRetry, fb.NextRetry)
	}
	if !done || e.monitorManifestRevision() != 0 {
		t.Errorf("a monitor without retry must remove its manifest and exit (done=%v)", done)
	}
}

func TestAnswersOfBothRevisionsDuringReplacement(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.serve(1, 1, 2) // the old process still shares the admin port
	m := e.monitor(2)
	if !e.stepFor(m, time.Minute) {
		t.Fatal("answers of revision 2 among revision 1's did not make it good")
	}
}

// Regression: with the old process sharing the admin port, the last probe
// before the timeout could be answered only by the old revision, and the
// fallback was then reported as Unhealthy instead of what revision 2 itself
// had said (NotReady).
func TestForeignAnswersAtTheTimeoutKeepTheLastOwnReason(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.op.set(func(o *operand) {
		o.ready = 503
		o.body = "[+]ping ok\n[-]config failed: broken object\nreadyz check failed\n"
	})
	e.serve(2)
	m := e.monitor(2)
	if e.stepFor(m, DefaultFallbackTimeout-10*time.Second) {
		t.Fatal("decided before the timeout")
	}
	if rs := e.state(2); rs != nil && rs.Outcome == revisions.OutcomeFailed {
		t.Fatal("failed before the timeout")
	}
	e.serve(1) // from now on only the old process answers
	e.stepFor(m, 20*time.Second)
	rs := e.state(2)
	if rs == nil || rs.Outcome != revisions.OutcomeFailed {
		t.Fatalf("no failure recorded: %+v", rs)
	}
	if rs.Reason != revisions.ReasonNotReady || !strings.Contains(rs.Message, "[-]config failed: broken object") {
		t.Fatalf("reason %s (%s), want NotReady with revision 2's own checks", rs.Reason, rs.Message)
	}
}

func TestStartsOfAnEarlierRolloutDoNotCount(t *testing.T) {
	e := newEnv(t)
	e.install(1)
	e.setLKG(1)
	e.install(2)
	// Two starts of revision 2 in an earlier rollout, an hour ago.
	e.record(revisions.RecordStart, 2, "")
	e.record(revisions.RecordStart, 2, "")
	e.clock.Step(time.Hour)
	e.publish(2, true)
	e.serve(2)
	e.record(revisions.RecordStart, 2, "")
	if !e.stepFor(e.monitor(2), time.Minute) || e.lkg() != 2 {
		t.Fatal("earlier rollout's starts counted against this one")
	}
}

func TestPreviousRevisionWithoutLink(t *testing.T) {
	e := newEnv(t)
	for n := 1; n <= 3; n++ {
		e.install(n)
	}
	e.publish(3, true)
	m := e.monitor(3)
	if !e.stepFor(m, DefaultFallbackTimeout+5*time.Second) {
		t.Fatal("NeverStartedUp did not finish the monitor")
	}
	rev, fb, _ := e.published()
	if rev != 2 || fb == nil || fb.ForRevision != 3 || fb.ToRevision != 2 {
		t.Fatalf("published %d %+v, want revision 2 as fallback for 3", rev, fb)
	}
}

func TestBootstrapHasNothingToFallBackTo(t *testing.T) {
	e := newEnv(t)
	e.install(1)
	e.publish(1, true)
	_, _, before := e.published()
	m := e.monitor(1)
	if !e.stepFor(m, DefaultFallbackTimeout+5*time.Second) {
		t.Fatal("monitor did not finish")
	}
	_, _, after := e.published()
	if !bytes.Equal(before, after) {
		t.Fatal("published manifest changed at bootstrap")
	}
	rs := e.state(1)
	if rs == nil || rs.Outcome != revisions.OutcomeFailed || len(rs.Fallbacks) != 1 || rs.Fallbacks[0].To != 0 {
		t.Fatalf("bootstrap failure not recorded: %+v", rs)
	}
}

func TestRetryPersistsAcrossRestart(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.op.set(func(o *operand) { o.health = 500 })
	m := e.monitor(2)
	if e.stepFor(m, DefaultFallbackTimeout+5*time.Second) {
		t.Fatal("finished with a retry pending")
	}
	first := *e.state(2).NextRetry

	// The monitor restarts half-way through the wait.
	e.clock.Step(5 * time.Minute)
	m = e.monitor(2)
	e.step(m)
	if rev, fb, _ := e.published(); rev != 1 || fb == nil {
		t.Fatal("restarted monitor lost the fallback")
	}
	if got := *e.state(2).NextRetry; !got.Equal(first) {
		t.Fatalf("restart moved the retry from %v to %v", first, got)
	}
	e.clock.Step(first.Sub(e.clock.Now()))
	e.step(m)
	rev, fb, data := e.published()
	if rev != 2 || fb != nil {
		t.Fatalf("retry published %d %+v, want revision 2 without fallback annotations", rev, fb)
	}
	orig, _ := os.ReadFile(e.l.RevisionPodManifest(2))
	if !bytes.Equal(data, orig) {
		t.Fatal("retry did not publish the original manifest")
	}
	rs := e.state(2)
	if rs.Attempts != 2 || rs.NextRetry != nil || rs.Outcome != revisions.OutcomeInstalled {
		t.Fatalf("state after retry start = %+v", rs)
	}

	// The second rollout fails too: the wait doubles.
	e.clock.Step(time.Second)
	e.record(revisions.RecordStart, 2, "")
	if e.stepFor(m, DefaultFallbackTimeout+5*time.Second) {
		t.Fatal("finished with a retry pending")
	}
	rs = e.state(2)
	if want := rs.DecidedAt.Add(20 * time.Minute); rs.NextRetry == nil || !rs.NextRetry.Equal(want) {
		t.Fatalf("second retry at %v, want %v", rs.NextRetry, want)
	}
	if len(rs.Fallbacks) != 2 || rs.Fallbacks[1].Attempt != 2 {
		t.Fatalf("history = %+v", rs.Fallbacks)
	}
	if _, fb, _ := e.published(); fb == nil || fb.Attempt != 2 {
		t.Fatalf("fallback annotations = %+v", fb)
	}

	// The third rollout is good.
	e.clock.Step(20 * time.Minute)
	e.step(m)
	e.clock.Step(time.Second)
	e.record(revisions.RecordStart, 2, "")
	e.op.set(func(o *operand) { o.health = 200 })
	if !e.stepFor(m, time.Minute) {
		t.Fatal("third rollout not good")
	}
	if rs := e.state(2); rs.Outcome != revisions.OutcomeGood || rs.Attempts != 3 || e.lkg() != 2 {
		t.Fatalf("state = %+v lkg %d", rs, e.lkg())
	}
}

func TestNewerRevisionCancelsRetry(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.op.set(func(o *operand) { o.health = 500 })
	m := e.monitor(2)
	if e.stepFor(m, DefaultFallbackTimeout+5*time.Second) {
		t.Fatal("finished with a retry pending")
	}
	_, _, fallback := e.published()
	e.install(3)
	e.copy(e.l.RevisionMonitorManifest(3), e.l.PublishedMonitorManifest())
	if !e.step(m) {
		t.Fatal("monitor of a superseded revision did not exit")
	}
	if e.monitorManifestRevision() != 3 {
		t.Fatal("the newer monitor's manifest was removed")
	}
	if _, _, now := e.published(); !bytes.Equal(now, fallback) {
		t.Fatal("superseded monitor touched the operand manifest")
	}
	if rs := e.state(2); rs.NextRetry != nil {
		t.Fatalf("retry not cancelled: %+v", rs)
	}
	// A restart of the old monitor does nothing either.
	e.clock.Step(time.Hour)
	if !e.step(e.monitor(2)) {
		t.Fatal("restarted superseded monitor did not exit")
	}
	if e.monitorManifestRevision() != 3 {
		t.Fatal("the newer monitor's manifest was removed")
	}
}

func TestSupersededByPublishedManifestRemovesOwnMonitorManifest(t *testing.T) {
	e := node12(t)
	e.install(3)
	e.publish(3, false) // operand of 3 published, monitor manifest still 2's
	if !e.step(e.monitor(2)) {
		t.Fatal("did not exit")
	}
	if e.monitorManifestRevision() != 0 {
		t.Fatal("own monitor manifest left behind")
	}
	if rs := e.state(2); rs != nil && rs.Outcome == revisions.OutcomeFailed {
		t.Fatal("superseded revision marked failed")
	}
}

// failing returns an FS whose named operation fails while *fail is set.
func failing(op string, fail *bool) revisions.FS {
	fs := revisions.OS()
	errInjected := errors.New("injected " + op + " failure")
	switch op {
	case "Symlink":
		orig := fs.Symlink
		fs.Symlink = func(o, n string) error {
			if *fail {
				return errInjected
			}
			return orig(o, n)
		}
	case "Rename":
		orig := fs.Rename
		fs.Rename = func(o, n string) error {
			if *fail {
				return errInjected
			}
			return orig(o, n)
		}
	}
	return fs
}

func TestLinkReplacementFailure(t *testing.T) {
	for _, op := range []string{"Symlink", "Rename"} {
		t.Run(op, func(t *testing.T) {
			e := node12(t)
			e.record(revisions.RecordStart, 2, "")
			fail := true
			fs := failing(op, &fail)
			m := e.monitor(2, func(o *Options) { o.FS = &fs; o.ReadySuccesses = 1 })
			done, err := m.Step(context.Background())
			if err == nil || done || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("step = %v, %v; want the injected error surfaced", done, err)
			}
			if e.lkg() != 1 {
				t.Fatalf("last-known-good = %d, want still 1", e.lkg())
			}
			target, _ := os.Readlink(e.l.LastKnownGoodLink())
			if !strings.HasPrefix(target, "revgate-pod-1/") {
				t.Fatalf("link = %q", target)
			}
			if rs := e.state(2); rs != nil && rs.Outcome == revisions.OutcomeGood {
				t.Fatal("recorded good without the link")
			}
			if e.monitorManifestRevision() != 2 {
				t.Fatal("own manifest removed without the link")
			}
			entries, _ := os.ReadDir(e.l.ResourceDir)
			for _, en := range entries {
				if revisions.IsTempName(en.Name()) {
					t.Fatalf("temp file left: %s", en.Name())
				}
			}
			fail = false
			if !e.step(m) || e.lkg() != 2 {
				t.Fatal("not good once the file system works again")
			}
		})
	}
}

func TestFallbackPublishFailureIsCompletedLater(t *testing.T) {
	e := node12(t)
	fail := false
	fs := revisions.OS()
	m := e.monitor(2, func(o *Options) { o.FS = &fs })
	e.stepFor(m, DefaultFallbackTimeout-time.Second)
	// The state file goes through Rename too: let it through, fail the publish.
	orig := fs.Rename
	fs.Rename = func(o, n string) error {
		if fail && n == e.l.PublishedPodManifest() {
			return errors.New("injected publish failure")
		}
		return orig(o, n)
	}
	m = e.monitor(2, func(o *Options) { o.FS = &fs })
	e.clock.Step(DefaultFallbackTimeout)
	fail = true
	for i := 0; i < 3; i++ {
		if _, err := m.Step(context.Background()); err != nil {
			if !strings.Contains(err.Error(), "injected publish failure") {
				t.Fatalf("unexpected error: %v", err)
			}
			break
		}
		e.clock.Step(DefaultFallbackTimeout)
	}
	if rs := e.state(2); rs == nil || rs.Outcome != revisions.OutcomeFailed {
		t.Fatalf("failure not recorded: %+v", rs)
	}
	fail = false
	if !e.step(m) {
		t.Fatal("monitor did not finish once the fallback was published")
	}
	rev, fb, _ := e.published()
	if rev != 1 || fb == nil || fb.Reason != revisions.ReasonNeverStartedUp {
		t.Fatalf("published %d %+v", rev, fb)
	}
	if rs := e.state(2); len(rs.Fallbacks) != 1 {
		t.Fatalf("history = %+v", rs.Fallbacks)
	}
}

func TestLockHeldDelaysTheDecision(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	lk, err := revisions.AcquireLock(context.Background(), e.l.LockFile, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := e.monitor(2, func(o *Options) { o.ReadySuccesses = 1; o.LockTimeout = 200 * time.Millisecond })
	done, err := m.Step(context.Background())
	if done || !errors.Is(err, revisions.ErrLockTimeout) {
		t.Fatalf("step under a held lock = %v, %v", done, err)
	}
	if e.lkg() != 1 {
		t.Fatal("decided without the lock")
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	if !e.step(m) {
		t.Fatal("not done once the lock is free")
	}
	// The monitor released the lock.
	lk, err = revisions.AcquireLock(context.Background(), e.l.LockFile, time.Second)
	if err != nil {
		t.Fatalf("lock not released: %v", err)
	}
	lk.Unlock()
}

func TestDecisionRechecksPublishedRevisionUnderLock(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	lk, err := revisions.AcquireLock(context.Background(), e.l.LockFile, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := e.monitor(2, func(o *Options) { o.ReadySuccesses = 1 })
	res := make(chan error, 1)
	go func() {
		done, err := m.Step(context.Background())
		if done {
			err = errors.New("decided")
		}
		res <- err
	}()
	time.Sleep(200 * time.Millisecond) // let the step reach the lock
	e.publish(1, false)                // someone else publishes under the lock
	lk.Unlock()
	if err := <-res; err != nil {
		t.Fatalf("step: %v", err)
	}
	if e.lkg() != 1 || e.state(2) != nil {
		t.Fatal("decided for a revision no longer published")
	}
}

func TestMirrorPodCheck(t *testing.T) {
	pod := func(rev string, ready corev1.ConditionStatus) *corev1.Pod {
		p := &corev1.Pod{}
		p.Namespace, p.Name = "kube-system", "revgate-node1"
		p.Labels = map[string]string{"revision": rev}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, Reason: "ContainersNotReady"}}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		err  error
		ok   bool
		msg  string
	}{
		{name: "ready", pod: pod("2", corev1.ConditionTrue), ok: true},
		{name: "old revision", pod: pod("1", corev1.ConditionTrue), msg: `has revision "1", want 2`},
		{name: "not ready", pod: pod("2", corev1.ConditionFalse), msg: "is not Ready: ContainersNotReady"},
		{name: "missing", err: errors.New(`pods "revgate-node1" not found`), msg: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := node12(t)
			m := e.monitor(2, func(o *Options) {
				o.Pods = podFunc(func(context.Context) (*corev1.Pod, error) { return tt.pod, tt.err })
			})
			ok, reason, msg, _ := m.mirrorPodCheck()(context.Background())
			if ok != tt.ok || (!ok && (reason != revisions.ReasonNotReady || !strings.Contains(msg, tt.msg))) {
				t.Fatalf("check = %v %s %q", ok, reason, msg)
			}
		})
	}
}

type podFunc func(context.Context) (*corev1.Pod, error)

func (f podFunc) MirrorPod(ctx context.Context) (*corev1.Pod, error) { return f(ctx) }

func TestRetryDelay(t *testing.T) {
	for _, tt := range []struct {
		name         string
		initial, max time.Duration
		attempt      int
		want         time.Duration
	}{
		{"first", 10 * time.Minute, 6 * time.Hour, 1, 10 * time.Minute},
		{"second doubles", 10 * time.Minute, 6 * time.Hour, 2, 20 * time.Minute},
		{"third", 10 * time.Minute, 6 * time.Hour, 3, 40 * time.Minute},
		{"sixth", 10 * time.Minute, 6 * time.Hour, 6, 320 * time.Minute},
		{"seventh is capped", 10 * time.Minute, 6 * time.Hour, 7, 6 * time.Hour},
		{"fortieth", 10 * time.Minute, 6 * time.Hour, 40, 6 * time.Hour},
		{"no attempt recorded yet", 10 * time.Minute, 6 * time.Hour, 0, 10 * time.Minute},
		{"initial is max", time.Hour, time.Hour, 5, time.Hour},
		{"run flags", 2 * time.Minute, 6 * time.Hour, 3, 8 * time.Minute},
		// Regression: the schedule stepped the backoff once per recorded
		// attempt, so a state file with a huge attempt count held the
		// monitor in a loop of that many steps.
		{"huge attempt count", 10 * time.Minute, 6 * time.Hour, math.MaxInt, 6 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryDelay(tt.initial, tt.max, tt.attempt); got != tt.want {
				t.Errorf("RetryDelay(%s, %s, %d) = %s, want %s", tt.initial, tt.max, tt.attempt, got, tt.want)
			}
		})
	}
}

func TestRunExitsWhenGood(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.autoStep(DefaultProbeInterval)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.monitor(2).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if e.lkg() != 2 {
		t.Fatal("not good")
	}
}

func TestRunWakesOnTerminationLogWrite(t *testing.T) {
	e := node12(t)
	if err := os.MkdirAll(e.l.ManifestsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(strings.TrimSuffix(e.l.TerminationLog, "/termination.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The clock never moves: only the file watcher can wake the loop.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := make(chan error, 1)
	m := e.monitor(2, func(o *Options) { o.ReadySuccesses = 1 })
	go func() { res <- m.Run(ctx) }()
	e.waitForWaiter() // the first step is taken; Run waits
	e.record(revisions.RecordStart, 2, "")
	if err := <-res; err != nil {
		t.Fatalf("run: %v", err)
	}
	if e.lkg() != 2 {
		t.Fatal("not good")
	}
}

func TestLockBusyAtTimeoutKeepsTheDecisionDue(t *testing.T) {
	e := node12(t)
	m := e.monitor(2, func(o *Options) { o.LockTimeout = 100 * time.Millisecond })
	e.stepFor(m, DefaultFallbackTimeout-time.Second)
	lk, err := revisions.AcquireLock(context.Background(), e.l.LockFile, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Second)
	if _, err := m.Step(context.Background()); !errors.Is(err, revisions.ErrLockTimeout) {
		t.Fatalf("step with the lock held = %v", err)
	}
	lk.Unlock()
	if !e.step(m) {
		t.Fatal("the due fallback was not taken at the next step")
	}
	if rev, fb, _ := e.published(); rev != 1 || fb == nil {
		t.Fatal("no fallback")
	}
}

// A monitor killed after recording a failure but before publishing the
// fallback completes the fallback when it starts again.
func TestRestartCompletesAnInterruptedFallback(t *testing.T) {
	for _, retried := range []bool{false, true} {
		t.Run(map[bool]string{false: "final", true: "retried"}[retried], func(t *testing.T) {
			e := node12(t)
			reason := revisions.ReasonCrashLooping
			var next *time.Time
			if retried {
				reason = revisions.ReasonNotReady
				n := e.clock.Now().Add(10 * time.Minute)
				next = &n
			}
			err := revisions.UpdateState(e.fs, e.l.StateFile(), func(s *revisions.State) error {
				rs := s.Get(2)
				rs.Outcome, rs.Reason, rs.Message, rs.Attempts, rs.NextRetry = revisions.OutcomeFailed, reason, "m", 1, next
				rs.Fallbacks = []revisions.Fallback{{Time: e.clock.Now(), Reason: reason, Message: "m", To: 1, Attempt: 1}}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			done := e.step(e.monitor(2))
			rev, fb, _ := e.published()
			if rev != 1 || fb == nil || fb.Reason != reason || (fb.NextRetry != nil) != retried {
				t.Fatalf("published %d %+v", rev, fb)
			}
			if done == retried {
				t.Fatalf("done = %v with retried = %v", done, retried)
			}
		})
	}
}

type eventFunc func(ctx context.Context, typ, reason, message string) error

func (f eventFunc) Emit(ctx context.Context, typ, reason, message string) error {
	return f(ctx, typ, reason, message)
}

// Events go to the API server after the lock is released: a slow API server
// must not hold up an installer.
func TestEventsAreSentOutsideTheLock(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	var reasons []string
	sink := eventFunc(func(ctx context.Context, typ, reason, message string) error {
		lk, err := revisions.AcquireLock(ctx, e.l.LockFile, 100*time.Millisecond)
		if err != nil {
			t.Errorf("event %s sent while the lock is held: %v", reason, err)
			return err
		}
		reasons = append(reasons, reason)
		return lk.Unlock()
	})
	m := e.monitor(2, func(o *Options) { o.Events = sink })
	if !e.stepFor(m, time.Minute) {
		t.Fatal("not good")
	}
	if len(reasons) != 1 || reasons[0] != EventRevisionGood {
		t.Fatalf("events = %v", reasons)
	}
}

// Regression: a published operand manifest that is not valid YAML has no
// revision label, and the monitor took it for another revision's and waited
// forever. When it is this revision's own manifest it must fall back.
func TestBadlyFormattedOwnManifestFallsBack(t *testing.T) {
	e := node12(t)
	bad := "apiVersion: v1\nkind: Pod\nmetadata: [unterminated\n"
	e.write(e.l.RevisionPodManifest(2), bad)
	e.copy(e.l.RevisionPodManifest(2), e.l.PublishedPodManifest())
	_, done := failure(t, e, func() {})
	checkFailure(t, e, done, revisions.ReasonNeverStartedUp, []string{"no start record"}, false)
}

// An unparsable published manifest that is not this revision's is someone
// else's: wait, never fall back.
func TestBadlyFormattedForeignManifestIsWaitedOn(t *testing.T) {
	e := node12(t)
	e.write(e.l.PublishedPodManifest(), "metadata: [not ours\n")
	m := e.monitor(2)
	if e.stepFor(m, 2*DefaultFallbackTimeout) {
		t.Fatal("monitor finished on a manifest that is not its revision's")
	}
	if rs := e.state(2); rs != nil && rs.Outcome == revisions.OutcomeFailed {
		t.Fatalf("fell back from a manifest that is not its revision's: %+v", rs)
	}
}
