// Package demo is a tiny HTTP upstream for trying revgate out and for its
// end-to-end tests: every response names the server that gave it, so a
// client can tell which backend a route reached.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// HeaderName is the response header carrying the server's name.
const HeaderName = "X-Demo-Upstream"

// shutdownGrace bounds how long Serve waits for requests in flight once its
// context is done.
const shutdownGrace = 5 * time.Second

// Handler answers every request with 200 and the body
// "<name> <method> <path>\n", and sets HeaderName to name. GET /healthz
// answers "ok" so active health checks have a cheap target.
func Handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderName, name)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.URL.Path == "/healthz" {
			fmt.Fprintln(w, "ok")
			return
		}
		fmt.Fprintf(w, "%s %s %s\n", name, r.Method, r.URL.Path)
	})
}

// Serve listens on addr and serves Handler(name) until ctx is done, then
// shuts down gracefully.
func Serve(ctx context.Context, addr, name string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ServeListener(ctx, ln, name, log)
}

// ServeListener serves Handler(name) on ln until ctx is done; ln is closed on
// return.
func ServeListener(ctx context.Context, ln net.Listener, name string, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "demo-upstream", "name", name)
	srv := &http.Server{Handler: Handler(name), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down %s: %w", name, err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", name, err)
	}
	log.Info("stopped")
	return nil
}
