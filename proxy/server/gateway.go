// Package server is the gateway's data plane: it compiles a model.Snapshot
// into a routing table and upstream pools, serves it on a plain and a TLS
// listener (HTTP/2 by ALPN, certificates by SNI), serves the admin endpoints,
// and shuts down gracefully.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/revgate/revgate/proxy/admin"
	"github.com/revgate/revgate/proxy/clock"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/upstream"
	"github.com/revgate/revgate/revisions"
)

// Defaults of Options.
const (
	DefaultHTTPAddr          = ":8080"
	DefaultHTTPSAddr         = ":8443"
	DefaultAdminAddr         = "127.0.0.1:9901"
	DefaultDrainTimeout      = 30 * time.Second
	DefaultShutdownDelay     = 2 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultAcceptGrace       = 500 * time.Millisecond
)

// Notifier receives service-manager notifications ("READY=1", "STATUS=...",
// "WATCHDOG=1", "STOPPING=1"). See SystemdNotifier.
type Notifier interface {
	Notify(state string)
}

// Options configure a Gateway. Zero values take the defaults above, except
// the addresses: an empty address disables its listener.
type Options struct {
	// HTTPAddr is the plain listener (--http-addr).
	HTTPAddr string
	// HTTPSAddr is the TLS listener (--https-addr); certificates are chosen
	// by SNI and handshakes without a matching certificate fail.
	HTTPSAddr string
	// AdminAddr is the admin listener (--admin-addr).
	AdminAddr string
	// DrainTimeout bounds waiting for in-flight requests at shutdown; 30s.
	DrainTimeout time.Duration
	// ShutdownDelay is how long the gateway keeps serving, not ready, after
	// a shutdown signal, so that load balancers stop sending first; 2s.
	// Negative disables the delay.
	ShutdownDelay time.Duration
	// AcceptGrace is how long, at shutdown, connections accepted just before
	// the listeners closed have to send their first request before the
	// drain begins; 500ms. Negative: none.
	AcceptGrace time.Duration
	// ReadHeaderTimeout bounds reading request headers (slowloris); 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes idle client keep-alive connections; 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes limits request headers (431 beyond); 64 KiB.
	MaxHeaderBytes int
	// Paths says how request paths are normalized before routing and
	// forwarding (--escaped-slashes, --merge-slashes); the zero value
	// rejects escaped slashes and merges repeated ones.
	Paths route.PathOptions
	// Transport tunes the upstream transports.
	Transport upstream.TransportOptions
	// Clock drives health checks and timed canaries; the wall clock when nil.
	Clock clock.Clock
	// Logger is the base logger; slog.Default() when nil.
	Logger *slog.Logger
	// Notifier receives systemd notifications; none when nil.
	Notifier Notifier
	// WatchdogInterval sends WATCHDOG=1 this often when > 0.
	WatchdogInterval time.Duration
	// PID is stamped on admin responses; os.Getpid() when 0.
	PID int
	// Pprof serves Go profiles under /debug/pprof/ on the admin listener.
	Pprof bool
	// Endpoints configures live endpoints (endpoints.go); off by default.
	Endpoints EndpointsOptions
}

func (o *Options) setDefaults() {
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.ShutdownDelay == 0 {
		o.ShutdownDelay = DefaultShutdownDelay
	}
	if o.AcceptGrace == 0 {
		o.AcceptGrace = DefaultAcceptGrace
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
}

// runtime is a compiled snapshot.
type runtime struct {
	snap  *model.Snapshot
	table *route.Table
	// pools by backend key.
	pools map[string]*upstream.Pool
	certs *certStore
	// certErr is why some certificates could not be used.
	certErr error
}

// Gateway serves one snapshot.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	metrics   *Metrics
	runtime   atomic.Pointer[runtime]
	httpsPort string

	mu          sync.Mutex // guards listeners
	listeners   []*listener
	listenErr   atomic.Pointer[error]
	bound       atomic.Bool
	draining    atomic.Bool
	hijackedMu  sync.Mutex
	hijacked    map[net.Conn]struct{}
	healthStart sync.Once
	// live follows the live endpoints file; nil when there is none.
	live *liveEndpoints
}

type listener struct {
	name, addr string
	// l is nil while the listener waits to join a port held by another
	// process.
	l      net.Listener
	srv    *http.Server
	secure bool
}

// New compiles a snapshot into a gateway; it binds nothing yet.
func New(snap *model.Snapshot, o Options) *Gateway {
	o.setDefaults()
	g := &Gateway{opts: o, log: o.Logger.With("component", "gateway"), metrics: NewMetrics(), hijacked: map[net.Conn]struct{}{}}
	if _, port, err := net.SplitHostPort(o.HTTPSAddr); err == nil {
		g.httpsPort = port
	}
	g.runtime.Store(g.compile(snap))
	g.metrics.setSnapshot(snap)
	g.initLiveEndpoints()
	return g
}

// compile builds the routing table, one pool per backend and the
// certificate store.
func (g *Gateway) compile(snap *model.Snapshot) *runtime {
	rt := &runtime{snap: snap, pools: map[string]*upstream.Pool{}}
	pool := func(b *model.Backend) *upstream.Pool {
		if p := rt.pools[b.Key]; p != nil {
			return p
		}
		p := upstream.NewPool(b, g.opts.Transport)
		p.OnHealthChange(func(p *upstream.Pool, e *upstream.Endpoint, _ bool) {
			g.endpointHealthChanged(p, e)
		})
		for _, e := range p.Endpoints() {
			g.metrics.setEndpointHealth(b.Key, e.Addr, e.Healthy())
		}
		rt.pools[b.Key] = p
		return p
	}
	keys := make([]string, 0, len(snap.Backends))
	for k := range snap.Backends {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pool(snap.Backends[k])
	}
	clusters := map[*model.Cluster]*upstream.Cluster{}
	rt.table = route.New(snap.Routes, func(r *model.Route) any {
		c := clusters[r.Cluster]
		if c == nil {
			if r.Cluster == nil {
				c = upstream.NewCluster(&model.Cluster{}, pool, g.opts.Clock)
			} else {
				c = upstream.NewCluster(r.Cluster, pool, g.opts.Clock)
				clusters[r.Cluster] = c
			}
		}
		return &routeInfo{cluster: c, label: routeLabel(r)}
	})
	rt.certs, rt.certErr = newCertStore(snap.Certificates)
	return rt
}

// routeLabel names a route in metrics: "host/path (Type)", "*" for any host.
func routeLabel(r *model.Route) string {
	host := r.Host
	if host == "" {
		host = "*"
	}
	if r.Default {
		return host + " (default)"
	}
	return host + r.Path + " (" + string(r.PathType) + ")"
}

// Handler returns the proxy handler of the plain (secure=false) or TLS
// listener.
func (g *Gateway) Handler(secure bool) http.Handler { return &Handler{g: g, secure: secure} }

// Metrics returns the gateway's metrics.
func (g *Gateway) Metrics() *Metrics { return g.metrics }

// Snapshot returns the snapshot being served.
func (g *Gateway) Snapshot() *model.Snapshot { return g.runtime.Load().snap }

// StartHealthChecks runs the active health checks until ctx is done (once).
func (g *Gateway) StartHealthChecks(ctx context.Context) {
	g.healthStart.Do(func() {
		for _, p := range g.runtime.Load().pools {
			go p.RunHealthChecks(ctx, g.opts.Clock, g.log.With("component", "healthcheck"))
		}
	})
}

// Listen binds the configured listeners with SO_REUSEPORT. The admin
// listener, and a traffic listener whose port no other process holds, are
// bound at once. A traffic port already held by another process (the
// revision being replaced, make-before-break) is joined only once this
// gateway is ready (see Serve): the kernel spreads new connections over
// every listener of a SO_REUSEPORT group, so joining earlier would hand
// clients to a gateway that cannot serve them yet.
func (g *Gateway) Listen(ctx context.Context) error {
	rt := g.runtime.Load()
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: g.opts.ReadHeaderTimeout,
			IdleTimeout:       g.opts.IdleTimeout,
			MaxHeaderBytes:    g.opts.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
			ConnContext:       connContext,
		}
	}
	specs := []struct {
		name, addr string
		secure     bool
		handler    http.Handler
	}{
		{"http", g.opts.HTTPAddr, false, g.Handler(false)},
		{"https", g.opts.HTTPSAddr, true, g.Handler(true)},
		{"admin", g.opts.AdminAddr, false, g.AdminHandler()},
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range specs {
		if s.addr == "" {
			continue
		}
		ls := &listener{name: s.name, addr: s.addr, srv: newServer(s.handler), secure: s.secure}
		if s.secure {
			ls.srv.TLSConfig = rt.certs.tlsConfig()
		}
		if s.name != "admin" {
			taken, err := portTaken(s.addr)
			if err != nil {
				g.closeListenersLocked()
				return fmt.Errorf("bind %s listener: %w", s.name, err)
			}
			if taken {
				g.log.Info("port held by another process, joining it once ready", "listener", s.name, "addr", s.addr)
				g.listeners = append(g.listeners, ls)
				continue
			}
		}
		l, err := listenReusePort(ctx, s.addr)
		if err != nil {
			g.closeListenersLocked()
			return fmt.Errorf("bind %s listener: %w", s.name, err)
		}
		ls.l = g.wrapListener(ls, l)
		g.listeners = append(g.listeners, ls)
		g.log.Info("listening", "listener", s.name, "addr", l.Addr().String())
	}
	g.bound.Store(true)
	return nil
}

// wrapListener puts the traffic listeners' connections behind the framing
// gate, completing TLS handshakes first on the TLS listener.
func (g *Gateway) wrapListener(ls *listener, l net.Listener) net.Listener {
	if ls.name == "admin" {
		return l
	}
	limit := g.opts.MaxHeaderBytes + 4096 // net/http's own allowance
	if ls.secure {
		return newTLSListener(l, ls.srv.TLSConfig, g.opts.ReadHeaderTimeout, limit, g.log)
	}
	return &gateListener{Listener: l, limit: limit}
}

// Addr returns the bound address of a listener ("http", "https", "admin"),
// nil when it is not bound (yet).
func (g *Gateway) Addr(name string) net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ls := range g.listeners {
		if ls.name == name && ls.l != nil {
			return ls.l.Addr()
		}
	}
	return nil
}

func (g *Gateway) closeListenersLocked() {
	for _, ls := range g.listeners {
		if ls.l != nil {
			ls.l.Close()
		}
	}
}

// waiting returns the traffic listeners not serving yet.
func (g *Gateway) waiting() []*listener {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*listener
	for _, ls := range g.listeners {
		if ls.l == nil {
			out = append(out, ls)
		}
	}
	return out
}

// Serve serves the bound listeners until ctx is done, then shuts down
// gracefully: not ready at once, keep serving for ShutdownDelay, stop
// accepting, drain in-flight requests up to DrainTimeout. Listeners whose
// port another process holds join once the readiness checks pass. It
// returns nil after a clean shutdown and an error when a listener failed.
func (g *Gateway) Serve(ctx context.Context) error {
	if !g.bound.Load() {
		return errors.New("serve before listen")
	}
	hcCtx, stopHC := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHC()
	g.StartHealthChecks(hcCtx)
	g.runLiveEndpoints(ctx)

	failed := make(chan error, 4)
	g.mu.Lock()
	for _, ls := range g.listeners {
		if ls.l != nil {
			g.serveListener(ls, failed)
		}
	}
	g.mu.Unlock()
	if len(g.waiting()) > 0 {
		go g.joinWhenReady(ctx, failed)
	} else {
		g.announceReady()
	}
	if g.opts.WatchdogInterval > 0 && g.opts.Notifier != nil {
		go g.watchdog(ctx)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-failed:
		g.log.Error("listener failed", "err", serveErr)
	}
	g.Shutdown()
	return serveErr
}

func (g *Gateway) serveListener(ls *listener, failed chan<- error) {
	go func() {
		// TLS listeners complete handshakes themselves (tlsListener).
		err := ls.srv.Serve(ls.l)
		// Shutdown closes the listeners itself before draining.
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !g.draining.Load() {
			err = fmt.Errorf("%s listener: %w", ls.name, err)
			g.listenErr.Store(&err)
			failed <- err
		}
	}()
}

func (g *Gateway) announceReady() {
	snap := g.Snapshot()
	g.notify("READY=1")
	g.notify(fmt.Sprintf("STATUS=serving revision %d: %d routes, %d backends, fallback %s", snap.Revision, len(snap.Routes), len(snap.Backends), snap.Fallback.Status))
}

// joinPollInterval is how often a waiting gateway re-evaluates readiness.
const joinPollInterval = 100 * time.Millisecond

// joinWhenReady binds the waiting listeners once the readiness checks
// (other than listeners and shutdown) pass.
func (g *Gateway) joinWhenReady(ctx context.Context, failed chan<- error) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error("joining listeners panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	t := g.opts.Clock.NewTicker(joinPollInterval)
	defer t.Stop()
	for {
		if err := g.gateReady(); err == nil {
			if err := g.join(ctx, failed); err != nil {
				g.listenErr.Store(&err)
				failed <- err
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (g *Gateway) join(ctx context.Context, failed chan<- error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining.Load() {
		return nil
	}
	for _, ls := range g.listeners {
		if ls.l != nil {
			continue
		}
		l, err := listenReusePort(ctx, ls.addr)
		if err != nil {
			return fmt.Errorf("join %s listener: %w", ls.name, err)
		}
		ls.l = g.wrapListener(ls, l)
		g.log.Info("ready, listening beside the other process", "listener", ls.name, "addr", l.Addr().String())
		g.serveListener(ls, failed)
	}
	go g.announceReady()
	return nil
}

// gateReady runs the readiness checks that decide whether to take traffic.
func (g *Gateway) gateReady() error {
	for _, c := range []func() (string, error){g.checkConfigReady, g.checkCertificates, g.checkFallback, g.checkUpstreams} {
		if _, err := c(); err != nil {
			return err
		}
	}
	return nil
}

// portTaken reports whether another socket listens on addr: a bind without
// SO_REUSEPORT fails then. Port 0 is never taken.
func portTaken(addr string) (bool, error) {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		l.Close()
		return false, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return true, nil
	}
	return false, err
}

func (g *Gateway) watchdog(ctx context.Context) {
	t := g.opts.Clock.NewTicker(g.opts.WatchdogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if !g.draining.Load() {
				g.notify("WATCHDOG=1")
			}
		}
	}
}

// Shutdown marks the gateway not ready, waits ShutdownDelay, closes the
// listeners and drains in-flight requests up to DrainTimeout.
func (g *Gateway) Shutdown() {
	if g.draining.Swap(true) {
		return
	}
	g.log.Info("shutting down", "delay", g.opts.ShutdownDelay, "drainTimeout", g.opts.DrainTimeout)
	g.notify("STOPPING=1")
	g.notify("STATUS=draining")
	if g.opts.ShutdownDelay > 0 {
		time.Sleep(g.opts.ShutdownDelay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.DrainTimeout)
	defer cancel()
	g.mu.Lock()
	listeners := slices.Clone(g.listeners)
	g.mu.Unlock()
	// Stop accepting first and let connections accepted just before read
	// their first request: http.Server.Shutdown would close such a
	// connection unanswered (golang/go#75591), and a client does not retry
	// a request on a new connection. Answers now carry Connection: close.
	traffic := false
	for _, l := range listeners {
		if l.name != "admin" && l.l != nil {
			l.l.Close()
			l.srv.SetKeepAlivesEnabled(false)
			traffic = true
		}
	}
	if traffic && g.opts.AcceptGrace > 0 {
		time.Sleep(min(g.opts.AcceptGrace, g.opts.DrainTimeout))
	}
	var wg sync.WaitGroup
	for _, l := range listeners {
		if l.name == "admin" || l.l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.srv.Shutdown(ctx); err != nil {
				g.log.Warn("drain incomplete, closing connections", "listener", l.name, "err", err)
				l.srv.Close()
			}
		}()
	}
	wg.Wait()
	g.closeHijacked()
	for _, l := range listeners {
		if l.name == "admin" {
			l.srv.Close()
		}
	}
	for _, p := range g.runtime.Load().pools {
		p.Close()
	}
	g.log.Info("stopped")
}

// trackHijacked records upgraded connections so that shutdown closes them
// (http.Server.Shutdown does not track hijacked connections).
func (g *Gateway) trackHijacked(c net.Conn, add bool) {
	g.hijackedMu.Lock()
	defer g.hijackedMu.Unlock()
	if add {
		g.hijacked[c] = struct{}{}
	} else {
		delete(g.hijacked, c)
	}
}

func (g *Gateway) closeHijacked() {
	g.hijackedMu.Lock()
	defer g.hijackedMu.Unlock()
	for c := range g.hijacked {
		c.Close()
	}
}

func (g *Gateway) notify(state string) {
	if g.opts.Notifier != nil {
		g.opts.Notifier.Notify(state)
	}
}

// AdminHandler returns the admin endpoints' handler. Checks: healthz has
// ping, config, listeners, certificates and fallback; livez ping and
// listeners; readyz the healthz checks (config failing in --fallback=off
// while objects are broken) plus shutdown and dependency/upstreams.
func (g *Gateway) AdminHandler() http.Handler {
	common := []admin.Check{
		{Name: "ping", Run: func() (string, error) { return "", nil }},
		{Name: "config", Run: g.checkConfigLoaded},
		{Name: "listeners", Run: g.checkListeners},
		{Name: "certificates", Run: g.checkCertificates},
		{Name: "fallback", Run: g.checkFallback},
	}
	// livez restarts the process when red (kubelet liveness): only what a
	// restart can mend belongs there.
	live := []admin.Check{common[0], common[2]}
	ready := slices.Clone(common)
	ready[1] = admin.Check{Name: "config", Run: g.checkConfigReady}
	ready[2] = admin.Check{Name: "listeners", Run: g.checkListenersReady}
	ready = append(ready,
		admin.Check{Name: "shutdown", Run: g.checkShutdown},
		// The prefix tells a startup monitor that this is a dependency
		// (DependencyUnhealthy) rather than the gateway not being ready.
		admin.Check{Name: revisions.DependencyCheckPrefix + "upstreams", Run: g.checkUpstreams},
	)
	return admin.NewHandler(admin.Options{
		Revision: g.Snapshot().Revision,
		PID:      g.opts.PID,
		Healthz:  common,
		Livez:    live,
		Readyz:   ready,
		Metrics:  g.metrics.Handler(),
		Pprof:    g.opts.Pprof,
		Debug: map[string]func() any{
			"/debug/config/status":   g.debugStatus,
			"/debug/config/routes":   g.debugRoutes,
			"/debug/config/fallback": func() any { return g.Snapshot().Fallback },

			// The live endpoints source (endpoints.go).
			"/debug/config/endpoints": g.debugEndpoints,
		},
	})
}

func (g *Gateway) checkConfigLoaded() (string, error) {
	s := g.Snapshot()
	return fmt.Sprintf("revision %d, %d routes", s.Revision, len(s.Routes)), nil
}

// checkConfigReady fails in --fallback=off while any object is broken.
func (g *Gateway) checkConfigReady() (string, error) {
	s := g.Snapshot()
	if s.Mode == model.FallbackOff {
		if errs := s.Errors(); len(errs) > 0 {
			names := make([]string, 0, len(errs))
			for _, p := range errs {
				names = append(names, p.String())
			}
			return "", fmt.Errorf("fallback is off and %d configuration errors: %s", len(errs), strings.Join(names, "; "))
		}
	}
	return g.checkConfigLoaded()
}

func (g *Gateway) checkListeners() (string, error) {
	if p := g.listenErr.Load(); p != nil {
		return "", *p
	}
	if !g.bound.Load() {
		return "", errors.New("listeners not bound yet")
	}
	return "", nil
}

// checkListenersReady also reports listeners waiting to join a port held by
// another process: green while the other checks keep the gateway out (so a
// monitor sees only those), red in the moment between passing them and
// taking traffic.
func (g *Gateway) checkListenersReady() (string, error) {
	if _, err := g.checkListeners(); err != nil {
		return "", err
	}
	waiting := g.waiting()
	if len(waiting) == 0 {
		return "", nil
	}
	addrs := make([]string, 0, len(waiting))
	for _, ls := range waiting {
		addrs = append(addrs, ls.addr)
	}
	if g.gateReady() == nil && !g.draining.Load() {
		return "", fmt.Errorf("joining %s", strings.Join(addrs, ", "))
	}
	return "waiting until ready to join " + strings.Join(addrs, ", ") + " (held by another process)", nil
}

func (g *Gateway) checkCertificates() (string, error) {
	rt := g.runtime.Load()
	if rt.certErr != nil {
		return "", rt.certErr
	}
	return fmt.Sprintf("%d certificates", rt.certs.count), nil
}

func (g *Gateway) checkFallback() (string, error) {
	f := g.Snapshot().Fallback
	status := f.Status
	if status == "" {
		status = model.FallbackNotTriggered
	}
	return fmt.Sprintf("%s: %d broken, %d excluded, %d backfilled objects", status,
		len(f.BrokenObjects), len(f.ExcludedObjects), len(f.BackfilledObjects)), nil
}

func (g *Gateway) checkShutdown() (string, error) {
	if g.draining.Load() {
		return "", errors.New("shutting down")
	}
	return "", nil
}

// checkUpstreams fails when a backend that has endpoints has none healthy.
func (g *Gateway) checkUpstreams() (string, error) {
	rt := g.runtime.Load()
	var bad []string
	for key, p := range rt.pools {
		if len(p.Endpoints()) > 0 && !p.HasHealthy() {
			bad = append(bad, key)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return "", fmt.Errorf("no healthy endpoint in backends %s", strings.Join(bad, ", "))
	}
	return fmt.Sprintf("%d backends", len(rt.pools)), nil
}

type statusDoc struct {
	Revision int                  `json:"revision"`
	Mode     model.FallbackMode   `json:"mode"`
	Objects  []model.ObjectStatus `json:"objects"`
	Problems []model.Problem      `json:"problems"`
}

func (g *Gateway) debugStatus() any {
	s := g.Snapshot()
	return statusDoc{Revision: s.Revision, Mode: s.Mode, Objects: nonNil(s.Objects), Problems: nonNil(s.Problems)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

type routeDoc struct {
	Host          string          `json:"host"`
	Path          string          `json:"path"`
	PathType      model.PathType  `json:"pathType"`
	Default       bool            `json:"default,omitempty"`
	RedirectHTTPS bool            `json:"redirectHTTPS,omitempty"`
	Backfilled    bool            `json:"backfilled,omitempty"`
	Source        model.ObjectRef `json:"source"`
	Cluster       string          `json:"cluster"`
	Backends      []backendDoc    `json:"backends"`
	Canary        *canaryDoc      `json:"canary,omitempty"`
}

type backendDoc struct {
	Key       string        `json:"key"`
	Weight    uint32        `json:"weight"`
	Strategy  string        `json:"strategy"`
	Endpoints []endpointDoc `json:"endpoints"`
}

type endpointDoc struct {
	Address string `json:"address"`
	Healthy bool   `json:"healthy"`
	Active  int64  `json:"active"`
}

type canaryDoc struct {
	Backend       backendDoc `json:"backend"`
	ActiveBuckets uint64     `json:"activeBuckets"`
	Steps         int        `json:"steps"`
}

func (g *Gateway) debugRoutes() any {
	rt := g.runtime.Load()
	backend := func(b *model.Backend, w uint32) backendDoc {
		d := backendDoc{Key: b.Key, Weight: w, Strategy: string(b.Strategy), Endpoints: []endpointDoc{}}
		if d.Strategy == "" {
			d.Strategy = string(model.RoundRobin)
		}
		if p := rt.pools[b.Key]; p != nil {
			for _, e := range p.Endpoints() {
				d.Endpoints = append(d.Endpoints, endpointDoc{Address: e.Addr, Healthy: e.Healthy(), Active: e.Active()})
			}
		}
		return d
	}
	out := []routeDoc{}
	for _, e := range rt.table.Entries() {
		r := e.Route
		d := routeDoc{Host: r.Host, Path: r.Path, PathType: r.PathType, Default: r.Default, RedirectHTTPS: r.RedirectHTTPS,
			Backfilled: r.Backfilled, Source: r.Source, Backends: []backendDoc{}}
		if r.Cluster != nil {
			d.Cluster = r.Cluster.Name
			for _, wb := range r.Cluster.Backends {
				if wb.Backend != nil {
					d.Backends = append(d.Backends, backend(wb.Backend, wb.Weight))
				}
			}
			if c := r.Cluster.Canary; c != nil && c.Backend != nil {
				cd := &canaryDoc{Backend: backend(c.Backend, 0), Steps: c.Steps}
				if cc := e.Value.(*routeInfo).cluster.Canary(); cc != nil {
					cd.ActiveBuckets = cc.ActiveBuckets()
				}
				d.Canary = cd
			}
		}
		out = append(out, d)
	}
	return out
}
