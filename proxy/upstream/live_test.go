package upstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/proxy/model"
)

func addrs(eps []*Endpoint) []string {
	out := []string{}
	for _, e := range eps {
		out = append(out, e.Addr)
	}
	return out
}

func TestSetEndpoints(t *testing.T) {
	p := NewPool(backend("ns/svc:80", "a:1"), TransportOptions{})
	a := p.Endpoints()[0]
	doneA := a.Begin()

	added, removed := p.SetEndpoints([]string{"a:1", "b:1", "b:1"})
	if got := addrs(p.Endpoints()); !reflect.DeepEqual(got, []string{"a:1", "b:1"}) {
		t.Fatalf("set %v", got)
	}
	if p.Endpoints()[0] != a || a.Active() != 1 {
		t.Fatal("an address that stayed lost its endpoint or its requests in flight")
	}
	if len(added) != 1 || added[0].Addr != "b:1" || len(removed) != 0 || !added[0].Healthy() {
		t.Fatalf("added %v removed %v", addrs(added), addrs(removed))
	}
	if got := addrs(p.Healthy()); !reflect.DeepEqual(got, []string{"a:1", "b:1"}) {
		t.Fatalf("healthy %v: without a health check new endpoints take traffic at once", got)
	}
	before := p.endpoints.Load()
	if added, removed := p.SetEndpoints([]string{"a:1", "b:1"}); added != nil || removed != nil || p.endpoints.Load() != before {
		t.Fatal("an unchanged set was replaced")
	}

	added, removed = p.SetEndpoints([]string{"b:1"})
	if len(added) != 0 || len(removed) != 1 || removed[0] != a {
		t.Fatalf("added %v removed %v", addrs(added), addrs(removed))
	}
	for i := 0; i < 10; i++ {
		if e := p.Pick(); e == a {
			t.Fatal("a removed endpoint was picked")
		}
	}
	if !a.retired.Load() || len(p.Lingering()) != 0 {
		t.Fatal("removed endpoint of a pool without health check not retired at once")
	}
	doneA()
	if a.Active() != 0 {
		t.Fatal("the request in flight to the removed endpoint did not end")
	}

	// Scaled to zero: no endpoint at all.
	p.SetEndpoints(nil)
	if len(p.Endpoints()) != 0 || p.Pick() != nil || p.HasHealthy() {
		t.Fatal("a pool with no endpoints still picks")
	}
	// And back: a new endpoint, not the retired one.
	p.SetEndpoints([]string{"a:1"})
	if e := p.Pick(); e == nil || e == a {
		t.Fatalf("picked %v after scaling back up", e)
	}
}

// TestSetEndpointsConcurrentPicks swaps the set while many goroutines pick
// and count requests; run with -race. Every pick is an endpoint of a set that
// was current at some point, never nil (no set is empty), and every request
// count returns to zero.
func TestSetEndpointsConcurrentPicks(t *testing.T) {
	sets := [][]string{{"a:1"}, {"a:1", "b:1"}, {"b:1", "c:1"}, {"c:1"}, {"a:1", "c:1", "d:1"}}
	valid := map[string]bool{"a:1": true, "b:1": true, "c:1": true, "d:1": true}
	for _, strategy := range []model.Strategy{model.RoundRobin, model.WeightedLeastRequest, model.Random} {
		t.Run(string(strategy), func(t *testing.T) {
			b := backend("ns/svc:80", sets[0]...)
			b.Strategy = strategy
			p := NewPool(b, TransportOptions{})
			var (
				mu    sync.Mutex
				seen  = map[*Endpoint]bool{}
				bad   atomic.Value
				stop  atomic.Bool
				picks atomic.Int64
				wg    sync.WaitGroup
			)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := map[*Endpoint]bool{}
					for !stop.Load() {
						e := p.Pick()
						if e == nil || !valid[e.Addr] {
							bad.Store(fmt.Sprintf("picked %v", e))
							return
						}
						done := e.Begin()
						local[e] = true
						picks.Add(1)
						done()
					}
					mu.Lock()
					for e := range local {
						seen[e] = true
					}
					mu.Unlock()
				}()
			}
			// Swap for a while; the pickers run beside on the other CPUs.
			for i, end := 0, time.Now().Add(300*time.Millisecond); time.Now().Before(end) && bad.Load() == nil; i++ {
				p.SetEndpoints(sets[i%len(sets)])
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
			stop.Store(true)
			wg.Wait()
			if v := bad.Load(); v != nil {
				t.Fatal(v)
			}
			if len(seen) < 4 || picks.Load() == 0 {
				t.Fatalf("only %d endpoints were picked in %d picks", len(seen), picks.Load())
			}
			for e := range seen {
				if e.Active() != 0 {
					t.Errorf("%s has %d requests in flight after all ended", e.Addr, e.Active())
				}
			}
		})
	}
}

// TestRemovedEndpointFinishesAndClosesIdle: a request in flight to an
// endpoint that is removed completes; once it ends, the pool keeps no
// connection to the endpoint.
func TestRemovedEndpointFinishesAndClosesIdle(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	var open atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	s.Start()
	defer s.Close()
	defer unblock()
	addr := s.Listener.Addr().String()
	p := NewPool(backend("ns/svc:80", addr), TransportOptions{})
	defer p.Close()

	// A request in flight, and an idle kept-alive connection.
	e := p.Pick()
	done := e.Begin()
	result := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+addr+"/slow", nil)
		resp, err := p.RoundTrip(req)
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done()
		result <- string(b)
	}()
	waitFor(t, "the slow request upstream", func() bool { return open.Load() == 1 })
	if code, body := fastGet(t, p, addr, "/other"); code != 200 || body != "ok /other" {
		t.Fatalf("second request %d %q", code, body)
	}
	if n := open.Load(); n != 2 {
		t.Fatalf("%d upstream connections, want 2", n)
	}

	p.SetEndpoints(nil)
	// The idle connection goes at once; the busy one stays.
	waitFor(t, "the idle connection closed", func() bool { return open.Load() == 1 })
	unblock()
	if got := <-result; got != "ok /slow" {
		t.Fatalf("request in flight to the removed endpoint: %q", got)
	}
	// Its connection went back to the idle pool and was closed by the end
	// of the request.
	waitFor(t, "no connection left to the removed endpoint", func() bool { return open.Load() == 0 })
}

// gatedUpstream answers health checks with the status it is given, holding
// each answer until released when gated.
type gatedUpstream struct {
	*httptest.Server
	status atomic.Int32
	gate   chan struct{}
	hits   atomic.Int32
}

func newGated(t *testing.T, gated bool) *gatedUpstream {
	u := &gatedUpstream{}
	u.status.Store(200)
	if gated {
		u.gate = make(chan struct{})
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if u.gate != nil {
			<-u.gate
		}
		w.WriteHeader(int(u.status.Load()))
	}))
	t.Cleanup(func() {
		if u.gate != nil {
			select {
			case <-u.gate:
			default:
				close(u.gate)
			}
		}
		u.Close()
	})
	return u
}

func (u *gatedUpstream) addr() string { return u.Listener.Addr().String() }

// TestHealthCheckedReplacement covers how new endpoints of a health-checked
// pool join: checked at once, taking traffic on their first success, while
// endpoints removed healthy keep the pool served until then.
func TestHealthCheckedReplacement(t *testing.T) {
	for _, tt := range []struct {
		name string
		// newStatus is the answer of the new endpoint's first check.
		newStatus int
		// keep: the old endpoint stays in the set (A → A+B) rather than
		// being replaced (A → B).
		keep bool
		// want is who takes traffic after the new endpoint's first verdict.
		want []string
	}{
		{name: "replace, new passes", newStatus: 200, want: []string{"new"}},
		{name: "replace, new fails", newStatus: 503, want: []string{}},
		{name: "add, new passes", newStatus: 200, keep: true, want: []string{"old", "new"}},
		{name: "add, new fails", newStatus: 503, keep: true, want: []string{"old"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			oldUp, newUp := newGated(t, false), newGated(t, true)
			newUp.status.Store(int32(tt.newStatus))
			names := map[string]string{oldUp.addr(): "old", newUp.addr(): "new"}
			b := backend("ns/svc:80", oldUp.addr())
			b.HealthCheck = &model.HealthCheck{Path: "/healthz", Interval: time.Hour, Timeout: 10 * time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1}
			p := NewPool(b, TransportOptions{})
			defer p.Close()
			clk := clocktest.New(time.Unix(0, 0))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { p.RunHealthChecks(ctx, clk, slog.New(slog.DiscardHandler)); close(done) }()
			defer func() { cancel(); <-done }()
			waitFor(t, "the old endpoint healthy", p.HasHealthy)
			old := p.Endpoints()[0]

			set := []string{newUp.addr()}
			if tt.keep {
				set = append([]string{oldUp.addr()}, set...)
			}
			p.SetEndpoints(set)
			// The new endpoint is checked at once, without a tick of the clock.
			waitFor(t, "the new endpoint's first check", func() bool { return newUp.hits.Load() == 1 })
			if got := addrs(p.Healthy()); len(got) != 1 || got[0] != oldUp.addr() {
				t.Fatalf("while the new endpoint waits for its verdict, traffic goes to %v, want the old endpoint only", got)
			}
			if !tt.keep && (len(p.Lingering()) != 1 || p.Lingering()[0] != old) {
				t.Fatalf("lingering %v", addrs(p.Lingering()))
			}
			if got := addrs(p.Endpoints()); !reflect.DeepEqual(got, set) {
				t.Fatalf("set %v, want %v (a lingering endpoint is not part of it)", got, set)
			}
			close(newUp.gate)
			waitFor(t, "the new endpoint's verdict", func() bool { return p.checks.Load() >= 2 })
			got := []string{}
			for _, e := range p.Healthy() {
				got = append(got, names[e.Addr])
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("after the verdict traffic goes to %v, want %v", got, tt.want)
			}
			if len(p.Lingering()) != 0 || (!tt.keep && !old.retired.Load()) {
				t.Fatal("the old endpoint still lingers after the new one's verdict")
			}
			// A removed endpoint is checked no more: only the new one's
			// ticker is left when the old one went.
			wantTickers := 1
			if tt.keep {
				wantTickers = 2
			}
			waitFor(t, "removed endpoints' checks stopped", func() bool { return clk.Tickers(0) == wantTickers })
		})
	}
}

// TestLingeringEndpointComesBack: an endpoint removed and added again
// before it left keeps its verdict.
func TestLingeringEndpointComesBack(t *testing.T) {
	oldUp, newUp := newGated(t, false), newGated(t, true)
	b := backend("ns/svc:80", oldUp.addr())
	b.HealthCheck = &model.HealthCheck{Path: "/healthz", Interval: time.Hour, Timeout: 10 * time.Second}
	p := NewPool(b, TransportOptions{})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.RunHealthChecks(ctx, clocktesting.NewFakeClock(time.Unix(0, 0)), slog.New(slog.DiscardHandler))
		close(done)
	}()
	defer func() { cancel(); <-done }()
	waitFor(t, "the old endpoint healthy", p.HasHealthy)
	old := p.Endpoints()[0]
	p.SetEndpoints([]string{newUp.addr()})
	added, _ := p.SetEndpoints([]string{oldUp.addr(), newUp.addr()})
	if len(added) != 1 || added[0] != old || !old.Healthy() || len(p.Lingering()) != 0 {
		t.Fatalf("added %v healthy %v lingering %v", addrs(added), old.Healthy(), addrs(p.Lingering()))
	}
	if got := p.Healthy(); len(got) != 1 || got[0] != old {
		t.Fatalf("healthy %v", addrs(got))
	}
}

// TestPickDoesNotAllocate: picking stays allocation-free with live sets.
func TestPickDoesNotAllocate(t *testing.T) {
	for _, strategy := range []model.Strategy{model.RoundRobin, model.WeightedLeastRequest, model.Random} {
		b := backend("ns/svc:80", "a:1", "b:1", "c:1")
		b.Strategy = strategy
		p := NewPool(b, TransportOptions{})
		p.SetEndpoints([]string{"b:1", "c:1", "d:1"})
		if n := testing.AllocsPerRun(1000, func() { p.Pick().Begin()() }); n != 0 {
			t.Errorf("%s: %.1f allocations per pick", strategy, n)
		}
	}
}

// BenchmarkPickWhileSwapping is request picking (pick, count in flight,
// end) while another goroutine replaces the pool's set every millisecond:
// it takes no lock and allocates nothing.
func BenchmarkPickWhileSwapping(b *testing.B) {
	sets := [][]string{{"a:1", "b:1", "c:1"}, {"b:1", "c:1", "d:1"}}
	for _, strategy := range []model.Strategy{model.RoundRobin, model.WeightedLeastRequest} {
		b.Run(string(strategy), func(b *testing.B) {
			be := backend("ns/svc:80", sets[0]...)
			be.Strategy = strategy
			p := NewPool(be, TransportOptions{})
			stop := make(chan struct{})
			swapped := make(chan struct{})
			go func() {
				defer close(swapped)
				t := time.NewTicker(time.Millisecond)
				defer t.Stop()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-t.C:
						p.SetEndpoints(sets[i%2])
					}
				}
			}()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p.Pick().Begin()()
				}
			})
			b.StopTimer()
			close(stop)
			<-swapped
		})
	}
}
