package controller

import (
	"context"
	"testing"
	"time"

	"github.com/revgate/revgate/internal/clocktest"
)

// The clock is stepped from one time to the next; after each step Wait must
// have armed its timer for when the run is due, or returned exactly when it
// is due. No real time passes.
func TestDebouncer(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at      time.Duration // clock time, from start
		trigger bool          // trigger at that time
		due     bool          // a run is due right after
		next    time.Duration // when not due: how soon it falls due (0: not at all)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "quiet period after a single change", steps: []step{
			{at: 0, trigger: true, next: time.Second}, {at: 900 * time.Millisecond, next: 100 * time.Millisecond}, {at: time.Second, due: true},
		}},
		{name: "each change restarts the quiet period", steps: []step{
			{at: 0, trigger: true, next: time.Second}, {at: 800 * time.Millisecond, trigger: true, next: time.Second},
			{at: 1500 * time.Millisecond, next: 300 * time.Millisecond}, {at: 1800 * time.Millisecond, due: true},
		}},
		{name: "a steady stream runs at the maximum delay", steps: []step{
			{at: 0, trigger: true, next: time.Second}, {at: 700 * time.Millisecond, trigger: true, next: time.Second},
			{at: 1400 * time.Millisecond, trigger: true, next: time.Second}, {at: 2100 * time.Millisecond, trigger: true, next: 900 * time.Millisecond},
			{at: 2800 * time.Millisecond, trigger: true, next: 200 * time.Millisecond}, {at: 3 * time.Second, due: true},
		}},
		{name: "nothing is due without a change", steps: []step{{at: 10 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.New(start)
			d := newDebouncer(clk, time.Second, 3*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- d.Wait(ctx) }()
			for _, s := range tt.steps {
				clk.Step(start.Add(s.at).Sub(clk.Now()))
				if s.trigger {
					d.Trigger()
				}
				if s.due {
					select {
					case err := <-done:
						if err != nil {
							t.Fatalf("at %s: %v", s.at, err)
						}
						return
					case <-time.After(waitLong):
						t.Fatalf("at %s: no run, want one", s.at)
					}
				}
				if s.next != 0 {
					waitPending(t, clk, s.next, 1)
				}
				select {
				case err := <-done:
					t.Fatalf("at %s: Wait returned %v before the run was due", s.at, err)
				default:
				}
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("Wait returned without a run or a cancel")
			}
		})
	}
}

// TriggerAfter triggers once its wait has passed on the debouncer's clock,
// and the run falls due a quiet period later.
func TestDebouncerTriggerAfter(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := newDebouncer(clk, time.Second, 3*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Wait(ctx) }()
	d.TriggerAfter(time.Minute)
	clk.Step(time.Minute - time.Millisecond)
	waitPending(t, clk, time.Millisecond, 1)
	clk.Step(time.Millisecond)
	waitPending(t, clk, time.Second, 1) // the trigger came: a quiet period to go
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before the quiet period", err)
	default:
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitPending waits until n timers of clk fall due d from now: the
// goroutine that arms them is done with what came before.
func waitPending(t *testing.T, clk *clocktest.Clock, d time.Duration, n int) {
	t.Helper()
	if !clk.AwaitPending(d, n, waitLong) {
		t.Fatalf("timed out waiting for %d timers of %s; %d armed", n, d, clk.Pending(d))
	}
}
