package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The listeners: binding with SO_REUSEPORT, the framing gate, and joining
// a port held by the process being replaced once ready.

// listenerRole tells the gateway's listeners apart.
type listenerRole uint8

const (
	roleHTTP  listenerRole = iota // plain traffic
	roleHTTPS                     // TLS traffic
	roleAdmin                     // health, metrics, debug
)

// String is the role's name in logs and for Gateway.Addr.
func (r listenerRole) String() string {
	switch r {
	case roleHTTP:
		return "http"
	case roleHTTPS:
		return "https"
	}
	return "admin"
}

// traffic reports whether the role carries proxied requests: such a
// listener passes the framing gate, joins a port held by the process being
// replaced only once ready, and drains at shutdown.
func (r listenerRole) traffic() bool { return r != roleAdmin }

type listener struct {
	role listenerRole
	addr string
	// l is nil while the listener waits to join a port held by another
	// process.
	l   net.Listener
	srv *http.Server
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
		role    listenerRole
		addr    string
		handler http.Handler
	}{
		{roleHTTP, g.opts.HTTPAddr, g.Handler(false)},
		{roleHTTPS, g.opts.HTTPSAddr, g.Handler(true)},
		{roleAdmin, g.opts.AdminAddr, g.AdminHandler()},
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range specs {
		if s.addr == "" {
			continue
		}
		ls := &listener{role: s.role, addr: s.addr, srv: newServer(s.handler)}
		if s.role == roleHTTPS {
			ls.srv.TLSConfig = rt.certs.tlsConfig()
		}
		if s.role.traffic() {
			taken, err := portTaken(s.addr)
			if err != nil {
				g.closeListenersLocked()
				return fmt.Errorf("bind %s listener: %w", s.role, err)
			}
			if taken {
				g.log.Info("port held by another process, joining it once ready", "listener", s.role.String(), "addr", s.addr)
				g.listeners = append(g.listeners, ls)
				continue
			}
		}
		l, err := listenReusePort(ctx, s.addr)
		if err != nil {
			g.closeListenersLocked()
			return fmt.Errorf("bind %s listener: %w", s.role, err)
		}
		ls.l = g.wrapListener(ls, l)
		g.listeners = append(g.listeners, ls)
		g.log.Info("listening", "listener", s.role.String(), "addr", l.Addr().String())
	}
	g.bound.Store(true)
	return nil
}

// wrapListener puts the traffic listeners' connections behind the framing
// gate, completing TLS handshakes first on the TLS listener.
func (g *Gateway) wrapListener(ls *listener, l net.Listener) net.Listener {
	if !ls.role.traffic() {
		return l
	}
	limit := g.opts.MaxHeaderBytes + 4096 // net/http's own allowance
	if ls.role == roleHTTPS {
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
		if ls.role.String() == name && ls.l != nil {
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

func (g *Gateway) serveListener(ls *listener, failed chan<- error) {
	go func() {
		// TLS listeners complete handshakes themselves (tlsListener).
		err := ls.srv.Serve(ls.l)
		// Shutdown closes the listeners itself before draining.
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !g.draining.Load() {
			err = fmt.Errorf("%s listener: %w", ls.role, err)
			g.listenErr.Store(&err)
			failed <- err
		}
	}()
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
			return fmt.Errorf("join %s listener: %w", ls.role, err)
		}
		ls.l = g.wrapListener(ls, l)
		g.log.Info("ready, listening beside the other process", "listener", ls.role.String(), "addr", l.Addr().String())
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

// listenReusePort binds addr with SO_REUSEPORT (and SO_REUSEADDR) so that a
// new gateway process can bind beside the old one during a make-before-break
// replacement.
func listenReusePort(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return l, nil
}
