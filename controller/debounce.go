package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// debouncer turns a burst of triggers into one run: a run is due once no
// trigger came for the quiet period, or once the maximum delay has passed
// since the burst's first trigger, whichever is first, so that a steady
// stream of changes still gets served.
type debouncer struct {
	quiet, max time.Duration
	clock      clock.WithTickerAndDelayedExecution

	kick chan struct{}

	mu          sync.Mutex
	pending     bool
	first, last time.Time
}

func newDebouncer(c clock.WithTickerAndDelayedExecution, quiet, max time.Duration) *debouncer {
	if max < quiet {
		max = quiet
	}
	return &debouncer{quiet: quiet, max: max, clock: c, kick: make(chan struct{}, 1)}
}

// Trigger records a change.
func (d *debouncer) Trigger() {
	d.mu.Lock()
	now := d.clock.Now()
	if !d.pending {
		d.pending, d.first = true, now
	}
	d.last = now
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// TriggerAfter records a change once wait has passed: the time a held-back
// snapshot may be installed again, or a rollout's "ask again later".
func (d *debouncer) TriggerAfter(wait time.Duration) {
	d.clock.AfterFunc(wait, d.Trigger)
}

// Wait blocks until a run is due and marks the burst as taken; triggers
// that come during the run start the next burst.
func (d *debouncer) Wait(ctx context.Context) error {
	for {
		d.mu.Lock()
		if !d.pending {
			d.mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-d.kick:
			}
			continue
		}
		due := d.last.Add(d.quiet)
		if limit := d.first.Add(d.max); limit.Before(due) {
			due = limit
		}
		wait := due.Sub(d.clock.Now())
		if wait <= 0 {
			d.pending = false
			d.mu.Unlock()
			return nil
		}
		d.mu.Unlock()
		t := d.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		case <-d.kick:
			t.Stop()
		}
	}
}
