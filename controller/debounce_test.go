package controller

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The clock is set step by step; after each step Wait must have returned
// exactly when a run is due.
func TestDebouncer(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at      time.Duration // clock time, from start
		trigger bool          // trigger at that time
		due     bool          // a run is due right after
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "quiet period after a single change", steps: []step{
			{at: 0, trigger: true}, {at: 900 * time.Millisecond}, {at: time.Second, due: true},
		}},
		{name: "each change restarts the quiet period", steps: []step{
			{at: 0, trigger: true}, {at: 800 * time.Millisecond, trigger: true}, {at: 1500 * time.Millisecond}, {at: 1800 * time.Millisecond, due: true},
		}},
		{name: "a steady stream runs at the maximum delay", steps: []step{
			{at: 0, trigger: true}, {at: 700 * time.Millisecond, trigger: true}, {at: 1400 * time.Millisecond, trigger: true},
			{at: 2100 * time.Millisecond, trigger: true}, {at: 2800 * time.Millisecond, trigger: true}, {at: 3 * time.Second, due: true},
		}},
		{name: "nothing is due without a change", steps: []step{{at: 10 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(start)
			d := newDebouncer(fc, time.Second, 3*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- d.Wait(ctx) }()
			for _, s := range tt.steps {
				fc.SetTime(start.Add(s.at))
				if s.trigger {
					d.Trigger()
				}
				// Let Wait look at the clock again before judging.
				time.Sleep(20 * time.Millisecond)
				select {
				case err := <-done:
					if !s.due || err != nil {
						t.Fatalf("at %s: Wait returned %v, due %v", s.at, err, s.due)
					}
					return
				default:
					if s.due {
						t.Fatalf("at %s: no run, want one", s.at)
					}
				}
			}
			cancel()
			if err := <-done; err == nil {
				t.Fatal("Wait returned without a run or a cancel")
			}
		})
	}
}
