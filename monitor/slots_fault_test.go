package monitor

import (
	"context"
	"testing"
	"time"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/revisions"
	"github.com/revgate/revgate/revisions/fsfault"
)

// TestSlotsDecisionFaultAtEveryStep fails each file-system operation of a
// decision in slots mode in turn, once and as a crash (everything after
// fails too, as if the monitor died there). Whatever the point, a slot still
// runs the revision that serves: the good revision's slot is never removed,
// the serving slot of a fallback keeps its uid and is never removed. A
// monitor started again then completes the decision.
func TestSlotsDecisionFaultAtEveryStep(t *testing.T) {
	for _, tt := range []struct {
		name string
		// setup prepares revision 2's rollout so that the first step decides.
		setup func(e *env)
		opts  func(o *Options)
		// serving is the slot that must run throughout and in the end.
		serving revisions.Slot
		check   func(t *testing.T, e *env, uid string)
	}{
		{
			name: "good",
			setup: func(e *env) {
				e.record(revisions.RecordStart, 2, "")
			},
			opts:    func(o *Options) { o.ReadySuccesses = 1 },
			serving: revisions.SlotB,
			check: func(t *testing.T, e *env, uid string) {
				if e.lkg() != 2 || e.state(2).Outcome != revisions.OutcomeGood || e.slot(revisions.SlotA) != nil {
					t.Fatalf("last-known-good %d, state %+v, slot a %v", e.lkg(), e.state(2), e.slot(revisions.SlotA))
				}
			},
		},
		{
			name: "fallback",
			setup: func(e *env) {
				for range DefaultCrashloopThreshold {
					e.record(revisions.RecordStart, 2, "")
				}
			},
			opts:    func(*Options) {},
			serving: revisions.SlotA,
			check: func(t *testing.T, e *env, uid string) {
				a := e.slot(revisions.SlotA)
				fb, err := fallbackstatus.Parse(a.Annotations)
				if e.slot(revisions.SlotB) != nil || a.UID != uid || err != nil || fb == nil || fb.ForRevision != 2 || fb.Reason != revisions.ReasonCrashLooping {
					t.Fatalf("slot b %v; slot a uid %s (was %s), fallback %+v %v", e.slot(revisions.SlotB), a.UID, uid, fb, err)
				}
				if e.lkg() != 1 || e.state(2).Outcome != revisions.OutcomeFailed || len(e.state(2).Fallbacks) != 1 {
					t.Fatalf("last-known-good %d, state %+v", e.lkg(), e.state(2))
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := func(t *testing.T, j *fsfault.Injector) (*env, string, error) {
				e := slots12(t)
				tt.setup(e)
				uid := e.slot(tt.serving).UID
				f := j.Wrap(e.fs)
				m := e.monitor(2, slotsMode, tt.opts, func(o *Options) { o.FS = &f })
				var err error
				for range 5 {
					var done bool
					if done, err = m.Step(context.Background()); done || err != nil {
						break
					}
					e.clock.Step(time.Second)
				}
				return e, uid, err
			}
			j := fsfault.New(0, fsfault.Once)
			e, uid, err := run(t, j)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, e, uid)
			total := j.Count()
			for _, mode := range []fsfault.Mode{fsfault.Once, fsfault.Crash} {
				for n := 1; n <= total; n++ {
					j := fsfault.New(n, mode)
					e, uid, _ := run(t, j)
					if s := e.slot(tt.serving); s == nil || s.UID != uid {
						t.Fatalf("mode %d fault %d (%s): the serving slot %s is %+v (uid was %s)", mode, n, j.Hit(), tt.serving, s, uid)
					}
					m := e.monitor(2, slotsMode, tt.opts)
					if !e.stepFor(m, DefaultFallbackTimeout+time.Minute) {
						t.Fatalf("mode %d fault %d (%s): the restarted monitor did not finish", mode, n, j.Hit())
					}
					tt.check(t, e, uid)
				}
			}
		})
	}
}
