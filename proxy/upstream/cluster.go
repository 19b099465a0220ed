package upstream

import (
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/revgate/revgate/proxy/model"
)

// Cluster chooses a backend pool for each request of a route: by canary
// bucket first, then by weight.
type Cluster struct {
	// Model is the cluster from the Snapshot.
	Model *model.Cluster
	pools []*Pool
	// cum are the cumulative weights of pools; zero-weight pools are absent.
	cum    []uint64
	total  uint64
	canary *Canary
}

// NewCluster compiles a cluster; pool returns the shared pool of a backend.
func NewCluster(c *model.Cluster, pool func(*model.Backend) *Pool, clk clock.PassiveClock) *Cluster {
	out := &Cluster{Model: c}
	for _, wb := range c.Backends {
		if wb.Weight == 0 || wb.Backend == nil {
			continue
		}
		out.total += uint64(wb.Weight)
		out.pools = append(out.pools, pool(wb.Backend))
		out.cum = append(out.cum, out.total)
	}
	if c.Canary != nil && c.Canary.Backend != nil {
		out.canary = NewCanary(c.Canary, pool(c.Canary.Backend), clk)
	}
	return out
}

// Pick returns the pool for a request, nil when the cluster has no backend.
func (c *Cluster) Pick(r *http.Request) *Pool {
	if c.canary != nil && c.canary.Use(r) {
		return c.canary.pool
	}
	switch len(c.pools) {
	case 0:
		return nil
	case 1:
		return c.pools[0]
	}
	n := rand.Uint64N(c.total)
	i := sort.Search(len(c.cum), func(i int) bool { return c.cum[i] > n })
	return c.pools[i]
}

// Pools returns the weighted pools (for health reporting).
func (c *Cluster) Pools() []*Pool { return c.pools }

// Canary is a compiled model.Canary.
type Canary struct {
	m       *model.Canary
	pool    *Pool
	clk     clock.PassiveClock
	steps   uint64
	counter atomic.Uint64
}

// Canary defaults.
const (
	DefaultCanarySteps          = 1000
	DefaultCanaryDuration       = time.Hour
	DefaultCanaryConsumerHeader = "X-Consumer-ID"
)

// NewCanary compiles a canary whose "Service B" is pool.
func NewCanary(m *model.Canary, pool *Pool, clk clock.PassiveClock) *Canary {
	steps := m.Steps
	if steps <= 0 {
		steps = DefaultCanarySteps
	}
	return &Canary{m: m, pool: pool, clk: clk, steps: uint64(steps)}
}

// ActiveBuckets is how many of the buckets go to the canary now.
func (c *Canary) ActiveBuckets() uint64 {
	var frac float64
	if c.m.Percentage != nil {
		frac = *c.m.Percentage / 100
	} else {
		d := c.m.Duration
		if d <= 0 {
			d = DefaultCanaryDuration
		}
		frac = float64(c.clk.Now().Sub(c.m.Start)) / float64(d)
	}
	switch {
	case frac <= 0:
		return 0
	case frac >= 1:
		return c.steps
	}
	return uint64(frac * float64(c.steps))
}

// Use reports whether the request goes to the canary backend.
func (c *Canary) Use(r *http.Request) bool {
	if h := c.m.OverrideHeader; h != "" {
		switch r.Header.Get(h) {
		case "always":
			return c.available()
		case "never":
			return false
		}
	}
	active := c.ActiveBuckets()
	if active == 0 {
		return false
	}
	if active < c.steps && c.Bucket(r) >= active {
		return false
	}
	return c.available()
}

// available is false when upstream fallback keeps traffic on the primary.
func (c *Canary) available() bool {
	return !c.m.UpstreamFallback || c.pool.HasHealthy()
}

// Bucket returns the request's bucket in [0, steps).
func (c *Canary) Bucket(r *http.Request) uint64 {
	key := c.key(r)
	if key == "" {
		return (c.counter.Add(1) - 1) % c.steps
	}
	return fnv64a(key) % c.steps
}

// fnv64a is FNV-1a over a string, without allocating.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// key is what keeps a client in its bucket, "" for none. Order: header (when
// asked for), consumer → ip → none.
func (c *Canary) key(r *http.Request) string {
	switch c.m.Hash {
	case model.CanaryHashNone:
		return ""
	case model.CanaryHashHeader:
		if c.m.HashHeader == "" {
			return ""
		}
		return r.Header.Get(c.m.HashHeader)
	case model.CanaryHashConsumer, "":
		ch := c.m.ConsumerHeader
		if ch == "" {
			ch = DefaultCanaryConsumerHeader
		}
		if v := r.Header.Get(ch); v != "" {
			return v
		}
	}
	return clientIP(r)
}

// clientIP is the address of the connection's peer (headers are not trusted).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Canary returns the compiled canary, nil when the cluster has none.
func (c *Cluster) Canary() *Canary { return c.canary }
