package upstream

import (
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// TransportOptions tune the HTTP transports of the pools.
type TransportOptions struct {
	// DialTimeout bounds connecting to an endpoint; default DefaultDialTimeout.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds waiting for an upstream's response
	// headers (a 504 when exceeded); default DefaultResponseHeaderTimeout.
	ResponseHeaderTimeout time.Duration
	// MaxIdleConnsPerHost is the keep-alive pool size per endpoint; default
	// DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes idle upstream connections; default 90s.
	IdleConnTimeout time.Duration
	// MaxResponseHeaderBytes bounds an upstream's response header block
	// (interim 1xx answers each count anew); beyond it the request fails
	// with 502. Default DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int64
}

// Defaults of TransportOptions.
const (
	DefaultDialTimeout            = 5 * time.Second
	DefaultResponseHeaderTimeout  = 60 * time.Second
	DefaultMaxIdleConnsPerHost    = 256
	DefaultMaxResponseHeaderBytes = 1 << 20
)

func (o TransportOptions) withDefaults() TransportOptions {
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = 90 * time.Second
	}
	if o.MaxResponseHeaderBytes <= 0 {
		o.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	return o
}

// NewTransport returns the transport the gateway uses for one backend:
// keep-alive pools sized for a proxy, no proxy from the environment, no
// transparent compression (bodies pass through untouched), HTTP/1.1 to
// upstreams.
func NewTransport(o TransportOptions, useTLS bool) *http.Transport {
	o = o.withDefaults()
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:            d.DialContext,
		MaxIdleConns:           0,
		MaxIdleConnsPerHost:    o.MaxIdleConnsPerHost,
		IdleConnTimeout:        o.IdleConnTimeout,
		ResponseHeaderTimeout:  o.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: o.MaxResponseHeaderBytes,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
	if useTLS {
		// Upstream certificates are not verified (see model.Backend.TLS).
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec
	}
	return t
}

// Pool is the live state of one model.Backend: its endpoints, their health,
// its strategy and its transport. Its set of endpoints can be replaced while
// it serves (SetEndpoints); picking takes no lock.
type Pool struct {
	// Backend is the backend from the Snapshot; its Endpoints are those of
	// the revision, which live endpoints may have replaced (see Endpoints).
	Backend *model.Backend
	// Transport carries requests to the endpoints.
	Transport *http.Transport
	// Scheme is "http" or "https".
	Scheme string

	fast *h1Client

	// endpoints is the current set ("members"), swapped whole.
	endpoints atomic.Pointer[[]*Endpoint]
	selector  Selector
	// healthy is the list requests pick from, swapped whole when a verdict
	// or the set changes so that picking takes no lock.
	healthy atomic.Pointer[[]*Endpoint]
	// mu serialises changes of the set, of lingering and of healthy.
	mu sync.Mutex
	// lingering are endpoints removed from a health-checked pool while
	// healthy, kept for picking only while no member is healthy and some
	// member still waits for its first verdict (see SetEndpoints).
	lingering []*Endpoint
	// checker runs the health checks; nil while they do not run.
	checker  *checker
	onHealth func(p *Pool, e *Endpoint, healthy bool)
	// checks counts completed health checks (tests wait on it).
	checks atomic.Int64
}

// NewPool makes the pool of a backend. Without a health check every endpoint
// is healthy; with one, endpoints start unhealthy until their first check
// passes (one success is enough at start-up).
func NewPool(b *model.Backend, o TransportOptions) *Pool {
	p := &Pool{Backend: b, selector: NewSelector(b.Strategy), Scheme: "http"}
	if b.TLS {
		p.Scheme = "https"
	}
	p.Transport = NewTransport(o, b.TLS)
	p.fast = newH1Client(o)
	eps := make([]*Endpoint, 0, len(b.Endpoints))
	for _, addr := range b.Endpoints {
		eps = append(eps, p.newEndpoint(addr))
	}
	p.endpoints.Store(&eps)
	p.mu.Lock()
	p.rebuildLocked()
	p.mu.Unlock()
	return p
}

// newEndpoint makes an endpoint of this pool: healthy at once without a
// health check, waiting for its first verdict with one.
func (p *Pool) newEndpoint(addr string) *Endpoint {
	e := &Endpoint{Addr: addr, pool: p}
	checked := p.Backend.HealthCheck != nil
	e.healthy.Store(!checked)
	e.pending.Store(checked)
	return e
}

// Endpoints returns the current set of endpoints, healthy or not (do not
// modify the slice). Endpoints removed by SetEndpoints are not in it, even
// while they finish requests in flight.
func (p *Pool) Endpoints() []*Endpoint { return *p.endpoints.Load() }

// Healthy returns the endpoints requests are sent to (do not modify the
// slice).
func (p *Pool) Healthy() []*Endpoint { return *p.healthy.Load() }

// HasHealthy reports whether any endpoint may take traffic.
func (p *Pool) HasHealthy() bool { return len(*p.healthy.Load()) > 0 }

// Pick returns an endpoint by the backend's strategy, nil when none is healthy.
func (p *Pool) Pick() *Endpoint {
	eps := *p.healthy.Load()
	if len(eps) == 0 {
		return nil
	}
	return p.selector.Select(eps)
}

// PickOther picks, by the backend's strategy, a healthy endpoint that is
// not among tried; nil when every healthy endpoint was tried.
func (p *Pool) PickOther(tried []*Endpoint) *Endpoint {
	eps := *p.healthy.Load()
	for range eps {
		if e := p.selector.Select(eps); !slices.Contains(tried, e) {
			return e
		}
	}
	for _, e := range eps {
		if !slices.Contains(tried, e) {
			return e
		}
	}
	return nil
}

// OnHealthChange registers a function called when the verdict of an
// endpoint of the current set changes (for metrics and logs). Call before
// health checks start.
func (p *Pool) OnHealthChange(f func(p *Pool, e *Endpoint, healthy bool)) { p.onHealth = f }

// SetHealthy records a verdict for an endpoint.
func (p *Pool) SetHealthy(e *Endpoint, healthy bool) {
	p.mu.Lock()
	// The first verdict ends the wait of a new endpoint even when it keeps
	// the endpoint unhealthy: lingering endpoints leave then.
	first := e.pending.Swap(false)
	changed := e.healthy.Swap(healthy) != healthy
	if changed || first {
		p.rebuildLocked()
	}
	member := !e.retired.Load() && !slices.Contains(p.lingering, e)
	p.mu.Unlock()
	if changed && member && p.onHealth != nil {
		p.onHealth(p, e, healthy)
	}
}

// rebuildLocked recomputes the list requests pick from: the healthy members,
// or, while none is healthy and some member waits for its first verdict,
// the healthy lingering endpoints. Lingering endpoints that are not needed
// any more are retired.
func (p *Pool) rebuildLocked() {
	members := *p.endpoints.Load()
	eps := make([]*Endpoint, 0, len(members))
	waiting := false
	for _, e := range members {
		if e.healthy.Load() {
			eps = append(eps, e)
		} else if e.pending.Load() {
			waiting = true
		}
	}
	if len(p.lingering) > 0 {
		if len(eps) == 0 && waiting {
			for _, e := range p.lingering {
				if e.healthy.Load() {
					eps = append(eps, e)
				}
			}
		} else {
			for _, e := range p.lingering {
				p.retireLocked(e)
			}
			p.lingering = nil
		}
	}
	p.healthy.Store(&eps)
}

// RoundTrip sends a request to an endpoint (req.URL.Host). Bodiless
// idempotent plain-HTTP requests run on the calling goroutine; the others
// (bodies, upgrades, TLS upstreams) go through Transport.
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	if eligible(req) {
		return p.fast.roundTrip(req)
	}
	return p.Transport.RoundTrip(req)
}

// Close closes idle connections.
func (p *Pool) Close() {
	p.Transport.CloseIdleConnections()
	p.fast.closeIdle()
}
