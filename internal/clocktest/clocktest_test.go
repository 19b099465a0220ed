package clocktest

import (
	"testing"
	"time"
)

func TestPendingTimers(t *testing.T) {
	c := New(time.Unix(100, 0))
	if c.Pending(time.Second) != 0 {
		t.Fatal("pending before any timer")
	}
	t1 := c.NewTimer(time.Second)
	c.NewTimer(time.Second)
	t2 := c.NewTimer(3 * time.Second)
	if c.Pending(time.Second) != 2 || c.Pending(3*time.Second) != 1 || c.Pending(2*time.Second) != 0 {
		t.Fatalf("pending 1s %d (want 2), 3s %d (want 1), 2s %d", c.Pending(time.Second), c.Pending(3*time.Second), c.Pending(2*time.Second))
	}
	c.Step(time.Second)
	select {
	case <-t1.C():
	default:
		t.Fatal("1s timer did not fire after a 1s step")
	}
	if c.Pending(2*time.Second) != 1 || c.Pending(3*time.Second) != 0 {
		t.Fatal("after 1s the 3s timer should be 2s away, and the fired one gone")
	}
	if !t2.Stop() || c.Pending(2*time.Second) != 0 {
		t.Fatal("a stopped timer is still pending")
	}
	t2.Reset(5 * time.Second)
	if c.Pending(5*time.Second) != 1 {
		t.Fatal("a reset timer is not pending")
	}
	ch := c.After(time.Minute)
	if c.Pending(time.Minute) != 1 {
		t.Fatal("After is not tracked")
	}
	c.Step(time.Minute)
	select {
	case <-ch:
	default:
		t.Fatal("After did not fire")
	}
}

func TestTickers(t *testing.T) {
	c := New(time.Unix(100, 0))
	a := c.NewTicker(time.Second)
	b := c.NewTicker(time.Minute)
	if c.Tickers(0) != 2 || c.Tickers(time.Second) != 1 || c.Tickers(time.Minute) != 1 || c.Tickers(time.Hour) != 0 {
		t.Fatalf("tickers: all %d, 1s %d, 1m %d", c.Tickers(0), c.Tickers(time.Second), c.Tickers(time.Minute))
	}
	c.Step(time.Second)
	select {
	case <-a.C():
	default:
		t.Fatal("1s ticker did not tick")
	}
	a.Stop()
	a.Stop()
	if c.Tickers(0) != 1 || c.Tickers(time.Second) != 0 {
		t.Fatalf("after stopping one (twice): %d tickers", c.Tickers(0))
	}
	b.Stop()
	if c.Tickers(0) != 0 {
		t.Fatal("stopped tickers still counted")
	}
}

func TestAwaitPending(t *testing.T) {
	c := New(time.Unix(100, 0))
	if c.AwaitPending(time.Second, 1, 10*time.Millisecond) {
		t.Fatal("a timer nobody armed is pending")
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		c.NewTimer(time.Second)
	}()
	if !c.AwaitPending(time.Second, 1, 10*time.Second) {
		t.Fatal("the timer armed meanwhile was not seen")
	}
}

// Regression: the fake calls an AfterFunc callback with its lock held, so a
// callback that reads the clock (the controller's debouncer does) hung the
// step that fired it.
func TestAfterFuncMayReadTheClock(t *testing.T) {
	c := New(time.Unix(100, 0))
	fired := make(chan time.Time, 1)
	c.AfterFunc(time.Second, func() { fired <- c.Now() })
	if c.Pending(time.Second) != 1 {
		t.Fatal("AfterFunc is not tracked")
	}
	c.Step(time.Second)
	select {
	case at := <-fired:
		if !at.Equal(time.Unix(101, 0)) {
			t.Fatalf("fired at %s", at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the callback did not run")
	}
	stopped := c.AfterFunc(time.Second, func() { fired <- c.Now() })
	if !stopped.Stop() || c.Pending(time.Second) != 0 {
		t.Fatal("a stopped AfterFunc is still pending")
	}
	c.Step(time.Second)
	select {
	case <-fired:
		t.Fatal("a stopped AfterFunc ran")
	case <-time.After(10 * time.Millisecond):
	}
}
