package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

// discardWriter is a minimal ResponseWriter, so the benchmark measures the
// handler and the upstream round trip rather than a recorder.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) EnableFullDuplex() error     { return nil }

// BenchmarkHandler is the proxy hot path: route lookup, backend pick,
// header rewriting, the upstream round trip over a kept-alive loopback
// connection, and the body copy (64-byte answer).
func BenchmarkHandler(b *testing.B) {
	body := []byte("0123456789012345678901234567890123456789012345678901234567890123")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer up.Close()
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			sb := newSnapshot()
			be := sb.backend("ns/up:80", addrOf(up))
			for i := 0; i < n; i++ {
				sb.route("bench.local", fmt.Sprintf("/svc%04d", i), model.PathPrefix, single(fmt.Sprintf("c%d", i), be))
			}
			g := New(sb.s, Options{})
			h := g.Handler(false)
			path := fmt.Sprintf("/svc%04d/x", n-1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := httptest.NewRequest("GET", path, nil)
				r.Host = "bench.local"
				r.RemoteAddr = "127.0.0.1:40000"
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, r)
			}
		})
	}
}
