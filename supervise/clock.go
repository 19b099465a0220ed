package supervise

import (
	"time"

	"github.com/cenkalti/backoff/v4"
	"k8s.io/utils/clock"
)

// sleep waits for d on clock c; it reports false when done is closed first.
func sleep(c clock.Clock, d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-done:
		return false
	}
}

// doublingBackOff returns delays from initial doubling up to max, without
// jitter and without end, on clock c.
func doublingBackOff(initial, max time.Duration, c clock.PassiveClock) *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxInterval(max),
		backoff.WithMaxElapsedTime(0),
		backoff.WithClockProvider(c),
	)
}
