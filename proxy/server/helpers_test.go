package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/internal/testcert"
	"github.com/revgate/revgate/proxy/model"
)

// echo is what the echo upstream reports about a request.
type echo struct {
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	URI    string      `json:"uri"`
	Query  string      `json:"query"`
	Header http.Header `json:"header"`
	Name   string      `json:"name"`
}

// newEcho starts an upstream answering with the request as JSON.
func newEcho(t testing.TB, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "X-Upstream-Hop")
		w.Header().Set("X-Upstream-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Upstream", name)
		json.NewEncoder(w).Encode(echo{Host: r.Host, Path: r.URL.Path, URI: r.RequestURI, Query: r.URL.RawQuery, Header: r.Header, Name: name})
	}))
	t.Cleanup(s.Close)
	return s
}

func addrOf(s *httptest.Server) string { return s.Listener.Addr().String() }

// snapshotBuilder makes hand-made snapshots.
type snapshotBuilder struct{ s *model.Snapshot }

func newSnapshot() *snapshotBuilder {
	return &snapshotBuilder{s: &model.Snapshot{Revision: 3, Backends: map[string]*model.Backend{}, Mode: model.FallbackExclude,
		Fallback: model.FallbackReport{Status: model.FallbackNotTriggered}}}
}

func (b *snapshotBuilder) backend(key string, eps ...string) *model.Backend {
	be := &model.Backend{Key: key, Endpoints: eps, Service: model.ObjectRef{Kind: "Service", Namespace: "ns", Name: key}}
	b.s.Backends[key] = be
	return be
}

func (b *snapshotBuilder) route(host, path string, pt model.PathType, c *model.Cluster) *model.Route {
	b.s.Routes = append(b.s.Routes, model.Route{Host: host, Path: path, PathType: pt, Cluster: c,
		Source: model.ObjectRef{Group: "networking.k8s.io", Kind: "Ingress", Namespace: "ns", Name: "ing"}})
	return &b.s.Routes[len(b.s.Routes)-1]
}

func single(name string, be *model.Backend) *model.Cluster {
	return &model.Cluster{Name: name, Backends: []model.WeightedBackend{{Backend: be, Weight: 1}}}
}

// runGateway serves snap on loopback listeners until the test ends.
func runGateway(t testing.TB, snap *model.Snapshot, o Options) (*Gateway, context.CancelFunc) {
	t.Helper()
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:0"
	}
	if o.HTTPSAddr == "" {
		o.HTTPSAddr = "127.0.0.1:0"
	}
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:0"
	}
	if o.ShutdownDelay == 0 {
		o.ShutdownDelay = -1
	}
	if o.AcceptGrace == 0 {
		o.AcceptGrace = 20 * time.Millisecond
		if _, fake := o.Clock.(*clocktest.Clock); fake {
			o.AcceptGrace = -1 // a test on a fake clock steps through the grace itself
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	g := New(snap, o)
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Listen(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("gateway did not stop")
		}
	}
	t.Cleanup(stop)
	return g, stop
}

func url(g *Gateway, listener, path string) string {
	scheme := "http"
	if listener == "https" {
		scheme = "https"
	}
	return scheme + "://" + g.Addr(listener).String() + path
}

// get sends a request with a Host header and returns status, headers, body.
func get(t testing.TB, c *http.Client, u, host string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", u, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func decodeEcho(t testing.TB, body string) echo {
	t.Helper()
	var e echo
	if err := json.NewDecoder(strings.NewReader(body)).Decode(&e); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return e
}

// selfSigned makes a certificate for hosts.
func selfSigned(t testing.TB, hosts ...string) *tls.Certificate { return testcert.TLS(t, hosts...) }

func newFakeClock() *clocktest.Clock { return clocktest.New(time.Unix(1_000_000, 0)) }
