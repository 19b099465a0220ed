// Package doubling builds revgate's one backoff schedule: delays from an
// initial one doubling up to a maximum, without jitter and without end
// (cenkalti/backoff's ExponentialBackOff so configured). The supervisor's
// restarts and watch retries, the startup monitor's retry schedule and the
// cluster loop's retries (list and watch calls during an API outage, failed
// syncs) all use it. Jitter spreads many clients hitting one server; here
// one node retries one thing (the few nodes of a cluster share an API
// server, with waits capped at a second for its list and watch calls), and
// the delays are stated exactly in the README and persisted (the monitor's
// next retry time), so there is none.
package doubling

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// New returns the schedule initial, 2×initial, … up to max, on clock c
// (which only matters for the backoff's elapsed time, unused here: nil
// stands for a clock that never moves).
func New(initial, max time.Duration, c backoff.Clock) *backoff.ExponentialBackOff {
	if c == nil {
		c = stillClock{}
	}
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxInterval(max),
		backoff.WithMaxElapsedTime(0),
		backoff.WithClockProvider(c),
	)
}

// stillClock is a backoff.Clock that stands still.
type stillClock struct{}

func (stillClock) Now() time.Time { return time.Time{} }
