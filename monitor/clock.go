package monitor

import (
	"sync"
	"time"
)

// Clock is the monitor's time seam: the fallback timeout, the probe interval
// and the retry schedule all read time through it, so tests move time instead
// of sleeping. Its Now also serves as backoff.Clock.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

var _ Clock = RealClock{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FakeClock is a manual clock for tests. With AutoAdvance set, After moves
// the time forward by d and fires at once, so a loop waiting on it runs
// through simulated hours in milliseconds; otherwise After fires only when
// Advance passes its deadline.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

var _ Clock = (*FakeClock)(nil)

// NewFakeClock returns a fake clock set to start; auto selects AutoAdvance.
func NewFakeClock(start time.Time, auto bool) *FakeClock {
	return &FakeClock{now: start, auto: auto}
}

// Now returns the fake time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel firing when the fake time reaches now+d.
func (f *FakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	if f.auto {
		f.now = f.now.Add(d)
		c <- f.now
		return c
	}
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), c: c})
	return c
}

// Advance moves the fake time forward by d and fires due waiters.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(f.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- f.now
	}
	f.waiters = kept
}
