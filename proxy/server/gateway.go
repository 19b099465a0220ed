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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/upstream"
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
	DefaultClientBodyTimeout = 60 * time.Second
	DefaultSendTimeout       = 60 * time.Second
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
	// ClientBodyTimeout bounds the wait between two reads of a request
	// body, as nginx's client_body_timeout: beyond it the request is
	// answered 408 and its connection closed; 60s. Negative: none.
	ClientBodyTimeout time.Duration
	// SendTimeout bounds the wait between two writes of a response to a
	// client, as nginx's send_timeout: beyond it the connection is closed,
	// so a client that stops reading holds no upstream connection; 60s.
	// Negative: none.
	SendTimeout time.Duration
	// MaxHeaderBytes limits request headers (431 beyond); 64 KiB.
	MaxHeaderBytes int
	// Paths says how request paths are normalized before routing and
	// forwarding (--escaped-slashes, --merge-slashes); the zero value
	// rejects escaped slashes and merges repeated ones.
	Paths route.PathOptions
	// Transport tunes the upstream transports.
	Transport upstream.TransportOptions
	// Clock is the time of every schedule of the gateway: health checks,
	// timed canaries, the join poll, the watchdog, the shutdown delay and
	// accept grace, the live endpoints' relist and watch restarts, and the
	// request and reload durations it reports. Socket deadlines and the
	// drain timeout stay on the wall clock: the kernel and net/http keep
	// those. clock.RealClock when nil.
	Clock clock.WithTicker
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
	if o.ClientBodyTimeout == 0 {
		o.ClientBodyTimeout = DefaultClientBodyTimeout
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
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

func (g *Gateway) announceReady() {
	snap := g.Snapshot()
	g.notify("READY=1")
	g.notify(fmt.Sprintf("STATUS=serving revision %d: %d routes, %d backends, fallback %s", snap.Revision, len(snap.Routes), len(snap.Backends), snap.Fallback.Status))
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
	g.log.Info("shutting down", "delay", g.opts.ShutdownDelay, "drain_timeout", g.opts.DrainTimeout)
	g.notify("STOPPING=1")
	g.notify("STATUS=draining")
	if g.opts.ShutdownDelay > 0 {
		<-g.opts.Clock.After(g.opts.ShutdownDelay)
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
		if l.role.traffic() && l.l != nil {
			l.l.Close()
			l.srv.SetKeepAlivesEnabled(false)
			traffic = true
		}
	}
	if traffic && g.opts.AcceptGrace > 0 {
		<-g.opts.Clock.After(min(g.opts.AcceptGrace, g.opts.DrainTimeout))
	}
	var wg sync.WaitGroup
	for _, l := range listeners {
		if !l.role.traffic() || l.l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.srv.Shutdown(ctx); err != nil {
				g.log.Warn("drain incomplete, closing connections", "listener", l.role.String(), "err", err)
				l.srv.Close()
			}
		}()
	}
	wg.Wait()
	g.closeHijacked()
	for _, l := range listeners {
		if !l.role.traffic() {
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
