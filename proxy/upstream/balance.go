// Package upstream holds the gateway's view of its backends: endpoints with
// health state and active request counts, the load-balancing strategies that
// pick among them, active HTTP health checks, and the per-route choice of a
// backend by weight or by canary bucket.
package upstream

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/revgate/revgate/proxy/model"
)

// Endpoint is one "host:port" of a backend.
type Endpoint struct {
	// Addr is "host:port".
	Addr string
	// active counts requests in flight (for WeightedLeastRequest).
	active atomic.Int64
	// healthy is the health-check verdict; always true without health checks.
	healthy atomic.Bool
	// pending is true until the first health verdict of an endpoint of a
	// health-checked pool.
	pending atomic.Bool
	// retired is set once the endpoint left its pool for good: the last
	// request in flight closes its idle connections.
	retired atomic.Bool
	// pool is the pool the endpoint belongs to (nil for bare endpoints).
	pool *Pool
	// stopCheck ends its health-check loop (under pool.mu).
	stopCheck func()
}

// Healthy reports the endpoint's health verdict.
func (e *Endpoint) Healthy() bool { return e.healthy.Load() }

// Active reports the requests in flight to the endpoint.
func (e *Endpoint) Active() int64 { return e.active.Load() }

// Begin counts a request in flight; call the returned function when it ends.
func (e *Endpoint) Begin() func() {
	e.active.Add(1)
	return e.end
}

func (e *Endpoint) end() {
	if e.active.Add(-1) == 0 && e.retired.Load() && e.pool != nil {
		// The connection of the request that just ended went back to the
		// idle pool: nothing will use it again.
		e.pool.closeIdle(e.Addr)
	}
}

// Selector picks one of the healthy endpoints (never called with none).
type Selector interface {
	Select(healthy []*Endpoint) *Endpoint
}

// SelectorFunc adapts a function to Selector.
type SelectorFunc func([]*Endpoint) *Endpoint

// Select calls f.
func (f SelectorFunc) Select(eps []*Endpoint) *Endpoint { return f(eps) }

var (
	_ Selector = (*RoundRobinSelector)(nil)
	_ Selector = LeastRequestSelector{}
	_ Selector = RandomSelector{}
	_ Selector = SelectorFunc(nil)
)

// RoundRobinSelector picks endpoints in turn.
type RoundRobinSelector struct{ next atomic.Uint64 }

// Select returns the next endpoint in turn.
func (s *RoundRobinSelector) Select(eps []*Endpoint) *Endpoint {
	if len(eps) == 1 {
		return eps[0]
	}
	n := s.next.Add(1) - 1
	return eps[n%uint64(len(eps))]
}

// LeastRequestSelector picks the one of two random endpoints with fewer
// requests in flight (power of two choices).
type LeastRequestSelector struct{}

// Select returns the less busy of two random endpoints.
func (LeastRequestSelector) Select(eps []*Endpoint) *Endpoint {
	if len(eps) == 1 {
		return eps[0]
	}
	a := eps[rand.IntN(len(eps))]
	b := eps[rand.IntN(len(eps))]
	if b.active.Load() < a.active.Load() {
		return b
	}
	return a
}

// RandomSelector picks a random endpoint.
type RandomSelector struct{}

// Select returns a random endpoint.
func (RandomSelector) Select(eps []*Endpoint) *Endpoint {
	return eps[rand.IntN(len(eps))]
}

// NewSelector returns the selector of a strategy (RoundRobin when empty or
// unknown).
func NewSelector(s model.Strategy) Selector {
	switch s {
	case model.WeightedLeastRequest:
		return LeastRequestSelector{}
	case model.Random:
		return RandomSelector{}
	default:
		return &RoundRobinSelector{}
	}
}
