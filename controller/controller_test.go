package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/revgate/internal/clocktest"
)

// A failed sync is retried after 0.5s doubling to 30s, on the controller's
// clock, until it succeeds; the next burst's failures start over at 0.5s.
func TestFailedSyncsAreRetried(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &Controller{clock: clk, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	d := newDebouncer(clk, 0, 0)
	var calls, failures atomic.Int32
	sync := func(context.Context) error {
		calls.Add(1)
		if failures.Load() > 0 {
			failures.Add(-1)
			return errors.New("the API server is away")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.loop(ctx, "test", d, sync)
	}()
	defer func() {
		cancel()
		<-done
	}()
	ms := time.Millisecond
	for _, burst := range []struct {
		name  string
		waits []time.Duration
	}{
		{"first burst", []time.Duration{500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"next burst starts over", []time.Duration{500 * ms, time.Second}},
	} {
		failures.Store(int32(len(burst.waits)))
		calls.Store(0)
		d.Trigger()
		for i, wait := range burst.waits {
			waitPending(t, clk, wait, 1)
			if n := calls.Load(); n != int32(i+1) {
				t.Fatalf("%s: %d syncs before the wait of %s, want %d", burst.name, n, wait, i+1)
			}
			clk.Step(wait)
		}
		waitFor(t, waitLong, burst.name+": the sync that succeeds", func() (bool, string) {
			return calls.Load() == int32(len(burst.waits)+1), fmt.Sprint(calls.Load(), " syncs")
		})
	}
}
