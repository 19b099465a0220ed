package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/proxy/model"
)

func backend(key string, eps ...string) *model.Backend {
	return &model.Backend{Key: key, Endpoints: eps}
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, want, tol)
	}
}

func TestStrategies(t *testing.T) {
	eps := []*Endpoint{{Addr: "a"}, {Addr: "b"}, {Addr: "c"}}
	t.Run("round robin cycles", func(t *testing.T) {
		s := NewSelector(model.RoundRobin)
		var got string
		for i := 0; i < 6; i++ {
			got += s.Select(eps).Addr
		}
		if got != "abcabc" {
			t.Fatalf("order %q", got)
		}
	})
	t.Run("random spreads evenly", func(t *testing.T) {
		s := NewSelector(model.Random)
		counts := map[string]int{}
		const n = 30000
		for i := 0; i < n; i++ {
			counts[s.Select(eps).Addr]++
		}
		for _, e := range eps {
			within(t, e.Addr, float64(counts[e.Addr])/n, 1.0/3, 0.03)
		}
	})
	t.Run("least request avoids the busy endpoint", func(t *testing.T) {
		s := NewSelector(model.WeightedLeastRequest)
		busy := []*Endpoint{{Addr: "busy"}, {Addr: "idle"}}
		busy[0].active.Store(10)
		counts := map[string]int{}
		const n = 10000
		for i := 0; i < n; i++ {
			counts[s.Select(busy).Addr]++
		}
		// Power of two choices with two endpoints: the busy one wins only
		// when both draws pick it (1/4).
		within(t, "busy share", float64(counts["busy"])/n, 0.25, 0.03)
	})
	t.Run("unknown strategy is round robin", func(t *testing.T) {
		if _, ok := NewSelector("").(*RoundRobinSelector); !ok {
			t.Fatal("default selector is not round robin")
		}
	})
}

func TestClusterWeights(t *testing.T) {
	a, b, z := backend("a", "1"), backend("b", "2"), backend("z", "3")
	pools := map[*model.Backend]*Pool{}
	poolOf := func(bk *model.Backend) *Pool {
		if pools[bk] == nil {
			pools[bk] = NewPool(bk, TransportOptions{})
		}
		return pools[bk]
	}
	c := NewCluster(&model.Cluster{Name: "c", Backends: []model.WeightedBackend{
		{Backend: a, Weight: 80}, {Backend: z, Weight: 0}, {Backend: b, Weight: 20},
	}}, poolOf, clock.RealClock{})
	r := httptest.NewRequest("GET", "/", nil)
	counts := map[string]int{}
	const n = 10000
	for i := 0; i < n; i++ {
		counts[c.Pick(r).Backend.Key]++
	}
	within(t, "a share", float64(counts["a"])/n, 0.8, 0.03)
	within(t, "b share", float64(counts["b"])/n, 0.2, 0.03)
	if counts["z"] != 0 {
		t.Errorf("zero-weight backend picked %d times", counts["z"])
	}
	empty := NewCluster(&model.Cluster{Name: "e"}, poolOf, clock.RealClock{})
	if empty.Pick(r) != nil {
		t.Error("empty cluster picked a pool")
	}
}

// upstreamServer is a real HTTP server whose health answer can be changed.
type upstreamServer struct {
	*httptest.Server
	status atomic.Int32
	hits   atomic.Int32
}

func newUpstream(t *testing.T) *upstreamServer {
	u := &upstreamServer{}
	u.status.Store(200)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer u.hits.Add(1)
		if r.Host != "hc.local" || r.URL.Path != "/healthz" {
			w.WriteHeader(400)
			return
		}
		w.WriteHeader(int(u.status.Load()))
	}))
	t.Cleanup(u.Close)
	return u
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestHealthChecks(t *testing.T) {
	up1, up2 := newUpstream(t), newUpstream(t)
	b := backend("ns/svc:80", up1.Listener.Addr().String(), up2.Listener.Addr().String())
	b.HealthCheck = &model.HealthCheck{Path: "/healthz", Host: "hc.local", Interval: time.Second, Timeout: time.Second, UnhealthyThreshold: 2, HealthyThreshold: 3}
	p := NewPool(b, TransportOptions{})
	if p.HasHealthy() {
		t.Fatal("endpoints healthy before the first check")
	}
	var changes atomic.Int32
	p.OnHealthChange(func(*Pool, *Endpoint, bool) { changes.Add(1) })
	clk := clocktest.New(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.RunHealthChecks(ctx, clk, slog.New(slog.DiscardHandler)); close(done) }()
	defer func() { cancel(); <-done }()

	e1, e2 := p.Endpoints()[0], p.Endpoints()[1]
	waitFor(t, "one success at start-up", func() bool { return e1.Healthy() && e2.Healthy() })
	waitFor(t, "tickers and first verdicts", func() bool { return clk.Tickers(0) == 2 && p.checks.Load() == 2 })

	// tick advances the clock one interval and waits until both endpoints
	// have been checked again (the upstreams count their requests).
	tick := func() {
		h0, h1, c0 := up1.hits.Load(), up2.hits.Load(), p.checks.Load()
		clk.Step(time.Second)
		waitFor(t, "checks", func() bool {
			return up1.hits.Load() > h0 && up2.hits.Load() > h1 && p.checks.Load() >= c0+2
		})
	}

	up1.status.Store(500)
	tick()
	if !e1.Healthy() {
		t.Fatal("one failure made the endpoint unhealthy (threshold 2)")
	}
	tick()
	if e1.Healthy() {
		t.Fatal("two failures in a row did not make the endpoint unhealthy")
	}
	if got := p.Healthy(); len(got) != 1 || got[0] != e2 {
		t.Fatalf("healthy list %v", got)
	}
	for i := 0; i < 20; i++ {
		if p.Pick() != e2 {
			t.Fatal("unhealthy endpoint got traffic")
		}
	}
	up2.status.Store(503)
	tick()
	if e2.Healthy() {
		t.Fatal("503 did not make the endpoint unhealthy at once")
	}
	if p.HasHealthy() || p.Pick() != nil {
		t.Fatal("pool with no healthy endpoint still picks")
	}
	up1.status.Store(200)
	tick()
	tick()
	if e1.Healthy() {
		t.Fatal("healthy again after 2 successes, threshold 3")
	}
	tick()
	if !e1.Healthy() {
		t.Fatal("not healthy after 3 successes")
	}
	if changes.Load() < 4 {
		t.Errorf("health change callbacks %d, want >= 4", changes.Load())
	}
}

// TestHealthCheckDownUpstream drives a real upstream process-like server
// through down → up → down → up, on a short real interval.
func TestHealthCheckDownUpstream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	b := backend("ns/down:80", addr)
	b.HealthCheck = &model.HealthCheck{Path: "/healthz", Host: "hc.local", Interval: 20 * time.Millisecond, Timeout: 200 * time.Millisecond,
		UnhealthyThreshold: 2, HealthyThreshold: 2}
	p := NewPool(b, TransportOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.RunHealthChecks(ctx, clock.RealClock{}, slog.New(slog.DiscardHandler)); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a few failed checks", func() bool { return p.checks.Load() >= 3 })
	if p.HasHealthy() {
		t.Fatal("endpoint without a server became healthy")
	}
	serve := func() *http.Server {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("address taken meanwhile: %v", err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
		go srv.Serve(l)
		return srv
	}
	srv := serve()
	waitFor(t, "healthy after the server came up", p.HasHealthy)
	srv.Close()
	waitFor(t, "unhealthy after the server went down", func() bool { return !p.HasHealthy() })
	srv = serve()
	defer srv.Close()
	waitFor(t, "healthy again after the server came back", p.HasHealthy)
}

func pct(v float64) *float64 { return &v }

func canaryCluster(m *model.Canary, clk clock.PassiveClock) (*Cluster, *Pool, *Pool) {
	a, b := backend("a", "1"), backend("b", "2")
	pa, pb := NewPool(a, TransportOptions{}), NewPool(b, TransportOptions{})
	m.Backend = b
	c := NewCluster(&model.Cluster{Name: "c", Backends: []model.WeightedBackend{{Backend: a, Weight: 1}}, Canary: m},
		func(bk *model.Backend) *Pool {
			if bk == b {
				return pb
			}
			return pa
		}, clk)
	return c, pa, pb
}

func TestCanaryPercentage(t *testing.T) {
	for _, hash := range []model.CanaryHash{model.CanaryHashNone, model.CanaryHashConsumer, model.CanaryHashHeader} {
		for _, p := range []float64{0, 10, 50, 100} {
			t.Run(fmt.Sprintf("%s/%v%%", hash, p), func(t *testing.T) {
				c, _, pb := canaryCluster(&model.Canary{Percentage: pct(p), Steps: 100, Hash: hash, HashHeader: "X-User"}, clock.RealClock{})
				const n = 10000
				canary := 0
				for i := 0; i < n; i++ {
					r := httptest.NewRequest("GET", "/", nil)
					r.Header.Set("X-Consumer-ID", fmt.Sprintf("consumer-%d", i))
					r.Header.Set("X-User", fmt.Sprintf("user-%d", i))
					if c.Pick(r) == pb {
						canary++
					}
				}
				within(t, "canary share", float64(canary)/n, p/100, 0.03)
			})
		}
	}
}

func TestCanaryStickiness(t *testing.T) {
	m := &model.Canary{Percentage: pct(0), Steps: 1000, Hash: model.CanaryHashConsumer}
	c, _, pb := canaryCluster(m, clock.RealClock{})
	const users = 2000
	onCanary := make([]bool, users)
	req := func(i int) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Consumer-ID", fmt.Sprintf("u%d", i))
		return r
	}
	for p := 0.0; p <= 100; p += 5 {
		*m.Percentage = p
		n := 0
		for i := 0; i < users; i++ {
			got := c.Pick(req(i)) == pb
			if onCanary[i] && !got {
				t.Fatalf("user %d flipped back to the primary at %v%%", i, p)
			}
			if got != (c.Pick(req(i)) == pb) {
				t.Fatalf("user %d not stable within one percentage", i)
			}
			onCanary[i] = got
			if got {
				n++
			}
		}
		within(t, fmt.Sprintf("share at %v%%", p), float64(n)/users, p/100, 0.05)
	}
}

func TestCanaryIPFallback(t *testing.T) {
	c, _, pb := canaryCluster(&model.Canary{Percentage: pct(50), Steps: 1000, Hash: model.CanaryHashConsumer}, clock.RealClock{})
	// Without a consumer header the client IP decides, consistently.
	for i := 0; i < 50; i++ {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = fmt.Sprintf("10.0.0.%d:1234", i)
		first := c.Pick(r) == pb
		for j := 0; j < 5; j++ {
			r.RemoteAddr = fmt.Sprintf("10.0.0.%d:%d", i, 2000+j)
			if (c.Pick(r) == pb) != first {
				t.Fatalf("ip 10.0.0.%d flip-flops", i)
			}
		}
	}
}

func TestCanaryTimedRollout(t *testing.T) {
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start.Add(-time.Minute))
	c, _, pb := canaryCluster(&model.Canary{Steps: 1000, Start: start, Duration: 100 * time.Minute, Hash: model.CanaryHashNone}, clk)
	share := func() float64 {
		const n = 5000
		k := 0
		r := httptest.NewRequest("GET", "/", nil)
		for i := 0; i < n; i++ {
			if c.Pick(r) == pb {
				k++
			}
		}
		return float64(k) / n
	}
	within(t, "before start", share(), 0, 0)
	clk.Step(time.Minute + 25*time.Minute)
	within(t, "at 25%", share(), 0.25, 0.01)
	clk.Step(50 * time.Minute)
	within(t, "at 75%", share(), 0.75, 0.01)
	clk.Step(time.Hour)
	within(t, "after the end", share(), 1, 0)
}

func TestCanaryOverrideAndFallback(t *testing.T) {
	m := &model.Canary{Percentage: pct(0), Steps: 100, Hash: model.CanaryHashNone, OverrideHeader: "X-Canary"}
	c, pa, pb := canaryCluster(m, clock.RealClock{})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Canary", "always")
	if c.Pick(r) != pb {
		t.Fatal("always did not force the canary")
	}
	*m.Percentage = 100
	r.Header.Set("X-Canary", "never")
	if c.Pick(r) != pa {
		t.Fatal("never did not force the primary")
	}
	r.Header.Del("X-Canary")
	if c.Pick(r) != pb {
		t.Fatal("100% did not pick the canary")
	}
	// Upstream fallback: the canary has no healthy endpoint.
	m.UpstreamFallback = true
	pb.SetHealthy(pb.Endpoints()[0], false)
	if c.Pick(r) != pa {
		t.Fatal("upstream fallback did not keep traffic on the primary")
	}
	m.UpstreamFallback = false
	if c.Pick(r) != pb {
		t.Fatal("without upstream fallback the canary is still picked")
	}
}

func TestTracker(t *testing.T) {
	tr := &tracker{hc: model.HealthCheck{}.WithDefaults()}
	h := false
	h = tr.observe(h, probeFailed)
	if h {
		t.Fatal("failure made healthy")
	}
	h = tr.observe(h, probeOK)
	if !h {
		t.Fatal("first success at start-up did not make healthy")
	}
	for i := 0; i < model.DefaultUnhealthyThreshold-1; i++ {
		h = tr.observe(h, probeFailed)
	}
	if !h {
		t.Fatal("unhealthy before the threshold")
	}
	h = tr.observe(h, probeFailed)
	if h {
		t.Fatal("healthy after threshold failures")
	}
}
