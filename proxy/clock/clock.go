// Package clock is the time seam of the gateway's data plane: health-check
// loops and timed canary rollouts read time through a Clock so that tests can
// advance it instead of sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes tickers.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker is the part of *time.Ticker the data plane uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTicker returns a time.Ticker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Fake is a manual clock for tests: time moves only with Advance, which fires
// every ticker whose period elapsed (at most one tick per ticker per call is
// buffered, like time.Ticker drops ticks for slow receivers).
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTicker returns a ticker firing on Advance.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker period")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTicker{f: f, period: d, next: f.now.Add(d), c: make(chan time.Time, 1)}
	f.tickers = append(f.tickers, t)
	return t
}

// Tickers returns how many tickers are running, so tests can wait for a loop
// to have started before advancing time.
func (f *Fake) Tickers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tickers)
}

// Advance moves time forward by d and fires due tickers.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	sort.Slice(f.tickers, func(i, j int) bool { return f.tickers[i].next.Before(f.tickers[j].next) })
	for _, t := range f.tickers {
		if t.next.After(f.now) {
			continue
		}
		for !t.next.After(f.now) {
			t.next = t.next.Add(t.period)
		}
		select {
		case t.c <- f.now:
		default:
		}
	}
}

type fakeTicker struct {
	f      *Fake
	period time.Duration
	next   time.Time
	c      chan time.Time
}

func (t *fakeTicker) C() <-chan time.Time { return t.c }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.tickers {
		if o == t {
			t.f.tickers = append(t.f.tickers[:i], t.f.tickers[i+1:]...)
			return
		}
	}
}
