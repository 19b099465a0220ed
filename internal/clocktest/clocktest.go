// Package clocktest is k8s.io/utils/clock/testing's FakeClock with what a
// test must know before it steps the clock: whether the timer or ticker it
// means to fire exists yet. A step taken before a loop armed its timer is
// lost, and the fake's own HasWaiters cannot tell (its tickers never leave
// it, even once stopped). Its AfterFunc calls back in a goroutine of its
// own, as the real clock does.
package clocktest

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Clock is a FakeClock that keeps track of its timers and tickers.
type Clock struct {
	*clocktesting.FakeClock

	mu      sync.Mutex
	timers  map[*timer]struct{}
	tickers map[time.Duration]int
}

var _ clock.WithTickerAndDelayedExecution = (*Clock)(nil)

// New returns a fake clock set to start.
func New(start time.Time) *Clock {
	return &Clock{
		FakeClock: clocktesting.NewFakeClock(start),
		timers:    map[*timer]struct{}{},
		tickers:   map[time.Duration]int{},
	}
}

// NewTimer returns a fake timer whose deadline the clock remembers until it
// fires or is stopped.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{Timer: c.FakeClock.NewTimer(d), c: c, at: c.Now().Add(d)}
	c.timers[t] = struct{}{}
	return t
}

// After is NewTimer's channel, so that it is tracked too.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// AfterFunc calls f in its own goroutine once d has passed, as
// time.AfterFunc does; the fake alone calls it with its lock held, where f
// could not even read the clock. The timer is tracked as NewTimer's are.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{Timer: c.FakeClock.AfterFunc(d, func() { go f() }), c: c, at: c.Now().Add(d)}
	c.timers[t] = struct{}{}
	return t
}

// NewTicker returns a fake ticker counted until it is stopped.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tickers[d]++
	return &ticker{Ticker: c.FakeClock.NewTicker(d), c: c, d: d}
}

// Pending returns how many timers fall due exactly d from now.
func (c *Clock) Pending(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	n := 0
	for t := range c.timers {
		if t.at.After(now) && t.at.Sub(now) == d {
			n++
		}
	}
	return n
}

// AwaitPending waits, in real time, until at least n timers fall due
// exactly d from now, and reports whether they did before timeout: the
// goroutine that arms them is then done with what came before, and a step
// of d fires them.
func (c *Clock) AwaitPending(d time.Duration, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for c.Pending(d) < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// Tickers returns how many tickers of period d run; d == 0 counts all.
func (c *Clock) Tickers(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d != 0 {
		return c.tickers[d]
	}
	n := 0
	for _, k := range c.tickers {
		n += k
	}
	return n
}

// Step moves the clock by d, fires what falls due and forgets fired timers.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.FakeClock.Step(d)
	now := c.Now()
	for t := range c.timers {
		if !t.at.After(now) {
			delete(c.timers, t)
		}
	}
}

type timer struct {
	clock.Timer
	c  *Clock
	at time.Time
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	delete(t.c.timers, t)
	t.c.mu.Unlock()
	return t.Timer.Stop()
}

func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.at = t.c.Now().Add(d)
	t.c.timers[t] = struct{}{}
	return t.Timer.Reset(d)
}

type ticker struct {
	clock.Ticker
	c    *Clock
	d    time.Duration
	once sync.Once
}

func (t *ticker) Stop() {
	t.once.Do(func() {
		t.c.mu.Lock()
		t.c.tickers[t.d]--
		t.c.mu.Unlock()
	})
	t.Ticker.Stop()
}
