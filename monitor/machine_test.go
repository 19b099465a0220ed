package monitor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/revisions"
)

// transitionTable is the monitor's decision, one row per transition:
// state, input, next state, action, and whether the step goes on. Every
// state × input not listed has no transition.
const transitionTable = `
Start         Superseded        Done          Leave              stop
Start         RecordedGood      Done          CompleteGood       stop
Start         RecordedRetry     RetryPending  ResumeRetry        go on
Start         RecordedFailed    Failed        -                  go on
Start         NothingRecorded   Waiting       -                  go on
Waiting       Superseded        Done          Leave              stop
Waiting       OtherPublished    Waiting       -                  stop
Waiting       OwnPublished      Watching      BeginRollout       go on
Watching      Superseded        Done          Leave              stop
Watching      RecordedGood      Done          -                  stop
Watching      RecordedRetry     RetryPending  AwaitRetry         stop
Watching      RecordedFailed    Failed        -                  go on
Watching      OtherPublished    Waiting       ForgetRollout      stop
Watching      Passed            Watching      -                  stop
Watching      Ready             Watching      DecideGood         go on
Watching      NotYet            Watching      -                  stop
Watching      Failing           Watching      FallBack           go on
Watching      Foreign           Watching      -                  stop
Watching      ForeignAtTimeout  Watching      FallBack           go on
RetryPending  Superseded        Done          Leave              stop
RetryPending  RetryWaiting      RetryPending  -                  stop
RetryPending  FallbackMissing   RetryPending  RepublishFallback  stop
RetryPending  RetryDue          RetryPending  StartRetry         go on
RetryPending  RetryStarted      Watching      -                  stop
Failed        Superseded        Done          Leave              stop
Failed        Tick              Done          Finish             stop
`

// TestTransitions checks the transition function against the table, for
// every state and every input.
func TestTransitions(t *testing.T) {
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(transitionTable), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			t.Fatalf("bad table row %q", line)
		}
		key := f[0] + " " + f[1]
		if _, dup := want[key]; dup {
			t.Fatalf("table lists %s twice", key)
		}
		want[key] = strings.Join(f[2:], " ")
	}
	for s := state(0); s < numStates; s++ {
		for in := input(0); in < numInputs; in++ {
			key := s.String() + " " + in.String()
			t.Run(key, func(t *testing.T) {
				tr, ok := next(s, in)
				got := "none"
				if ok {
					got = fmt.Sprintf("%s %s %s", tr.next, tr.action, tr.then)
				}
				exp, listed := want[key]
				if !listed {
					exp = "none"
				}
				if got != exp {
					t.Errorf("%s: got %q, want %q", key, got, exp)
				}
				delete(want, key)
			})
		}
	}
	for key := range want {
		t.Errorf("table row %s names no state or input", key)
	}
}

// TestMachineShape checks rules the table keeps: every state but Done can
// be left, Done has no transition, and a newer revision ends every state.
func TestMachineShape(t *testing.T) {
	for s := state(0); s < numStates; s++ {
		n := len(transitions[s])
		if s == stateDone && n != 0 {
			t.Errorf("Done has %d transitions", n)
		}
		if s != stateDone {
			if tr, ok := next(s, inSuperseded); !ok || tr.next != stateDone || tr.action != actLeave {
				t.Errorf("%s on Superseded = %+v %v, want Done by Leave", s, tr, ok)
			}
		}
	}
	for i, names := range [][]string{stateNames[:], inputNames[:], actionNames[:]} {
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || seen[n] {
				t.Errorf("name list %d: empty or repeated name %q", i, n)
			}
			seen[n] = true
		}
	}
}

// TestStepWalksTheTable follows the state through whole scenarios: Step
// takes the table's transitions, several in one step where the table says
// go on.
func TestStepWalksTheTable(t *testing.T) {
	// walk steps m every second of fake time for d and returns the states
	// it stood in after each step.
	walk := func(e *env, m *Monitor, d time.Duration) []state {
		e.t.Helper()
		var seen []state
		end := e.clock.Now().Add(d)
		for {
			done := e.step(m)
			seen = append(seen, m.state)
			if done || !e.clock.Now().Before(end) {
				return seen
			}
			e.clock.Step(time.Second)
		}
	}
	t.Run("waiting, watching, good", func(t *testing.T) {
		e := node12(t)
		e.publish(1, false)
		m := e.monitor(2)
		got := walk(e, m, 3*time.Second)
		e.publish(2, false)
		e.record(revisions.RecordStart, 2, "")
		got = append(got, walk(e, m, time.Minute)...)
		assertStates(t, got, stateWaiting, stateWatching, stateDone)
	})
	// intoRetry runs revision 2, unhealthy, into a fallback with a retry
	// pending.
	intoRetry := func(t *testing.T) (*env, *Monitor, []state) {
		e := node12(t)
		e.record(revisions.RecordStart, 2, "")
		e.op.set(func(o *operand) { o.health = 500 })
		m := e.monitor(2)
		return e, m, walk(e, m, DefaultFallbackTimeout+5*time.Second)
	}
	t.Run("retried failure, retry, good", func(t *testing.T) {
		e, m, got := intoRetry(t)
		e.clock.Step(10 * time.Minute)
		got = append(got, walk(e, m, 0)...)
		e.clock.Step(time.Second)
		e.record(revisions.RecordStart, 2, "")
		e.op.set(func(o *operand) { o.health = 200 })
		got = append(got, walk(e, m, time.Minute)...)
		assertStates(t, got, stateWatching, stateRetryPending, stateWatching, stateDone)
	})
	t.Run("failure not retried ends in the same step", func(t *testing.T) {
		e := node12(t)
		for range DefaultCrashloopThreshold {
			e.record(revisions.RecordStart, 2, "")
		}
		m := e.monitor(2)
		done, err := m.Step(context.Background())
		if err != nil || !done || m.state != stateDone {
			t.Fatalf("step = %v, %v in %s; want done in one step", done, err, m.state)
		}
	})
	t.Run("restart resumes a pending retry", func(t *testing.T) {
		e, _, _ := intoRetry(t)
		assertStates(t, walk(e, e.monitor(2), 0), stateRetryPending)
	})
	t.Run("a newer revision ends a pending retry", func(t *testing.T) {
		e, m, got := intoRetry(t)
		e.install(3)
		got = append(got, walk(e, m, 0)...)
		assertStates(t, got, stateWatching, stateRetryPending, stateDone)
	})
	// The failure is recorded, then putting the fallback in place fails:
	// the record stands, so the monitor is Failed with the error, and the
	// next step completes the fallback.
	t.Run("recorded failure whose fallback failed", func(t *testing.T) {
		e := node12(t)
		fail := true
		fs := revisions.OS()
		rename := fs.Rename
		fs.Rename = func(o, n string) error {
			if fail && n == e.l.PublishedPodManifest() {
				return errors.New("injected publish failure")
			}
			return rename(o, n)
		}
		for range DefaultCrashloopThreshold {
			e.record(revisions.RecordStart, 2, "")
		}
		m := e.monitor(2, func(o *Options) { o.FS = &fs })
		done, err := m.Step(context.Background())
		if done || err == nil || m.state != stateFailed {
			t.Fatalf("step = %v, %v in %s; want the injected error in Failed", done, err, m.state)
		}
		fail = false
		if done, err := m.Step(context.Background()); !done || err != nil {
			t.Fatalf("step = %v, %v in %s; want done", done, err, m.state)
		}
	})
}

// assertStates compares the states walked through, repeats left out.
func assertStates(t *testing.T, walked []state, want ...state) {
	t.Helper()
	var got []state
	for _, s := range walked {
		if len(got) == 0 || got[len(got)-1] != s {
			got = append(got, s)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("states %v, want %v", got, want)
	}
}
