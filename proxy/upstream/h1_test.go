package upstream

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func fastGet(t *testing.T, p *Pool, addr, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	resp, err := p.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

func TestFastPathReusesConnections(t *testing.T) {
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	defer s.Close()
	p := NewPool(backend("b", s.Listener.Addr().String()), TransportOptions{})
	defer p.Close()
	for i := 0; i < 10; i++ {
		if code, body := fastGet(t, p, s.Listener.Addr().String(), "/x"); code != 200 || body != "hello /x" {
			t.Fatalf("answer %d %q", code, body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections for 10 sequential requests, want 1", n)
	}
}

// TestFastPathRetriesStaleConnection: the upstream closes every connection
// after one answer without saying so; the next request meets a dead pooled
// connection and must be retried on a new one.
func TestFastPathRetriesStaleConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				time.Sleep(20 * time.Millisecond)
			}()
		}
	}()
	p := NewPool(backend("b", l.Addr().String()), TransportOptions{})
	defer p.Close()
	for i := 0; i < 3; i++ {
		if code, body := fastGet(t, p, l.Addr().String(), "/"); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		time.Sleep(50 * time.Millisecond) // the upstream has closed by now
	}
	if n := accepted.Load(); n < 3 {
		t.Fatalf("%d connections, want a new one per request", n)
	}
}

func TestFastPathEligibility(t *testing.T) {
	cases := []struct {
		method, url string
		body        io.Reader
		upgrade     bool
		want        bool
	}{
		{"GET", "http://a/", nil, false, true},
		{"HEAD", "http://a/", nil, false, true},
		{"POST", "http://a/", strings.NewReader("x"), false, false},
		{"DELETE", "http://a/", nil, false, false},
		{"GET", "https://a/", nil, false, false},
		{"GET", "http://a/", nil, true, false},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, tc.url, tc.body)
		if tc.upgrade {
			req.Header.Set("Upgrade", "websocket")
		}
		if got := eligible(req); got != tc.want {
			t.Errorf("%s %s upgrade=%v: eligible %v, want %v", tc.method, tc.url, tc.upgrade, got, tc.want)
		}
	}
}

// hostileUpstream accepts connections, reads a request head and answers
// with what answer writes, until the gateway stops reading.
func hostileUpstream(t *testing.T, answer func(w io.Writer) error) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				_ = answer(c)
			}()
		}
	}()
	return l.Addr().String()
}

// TestHostileUpstreamAnswers: an upstream that sends an endless header
// block, or endless interim answers, fails the request instead of making the
// gateway buffer without bound or loop; on the fast path and through the
// Transport (requests with a body) alike. Before the bound, the fast path
// read any header block whole.
func TestHostileUpstreamAnswers(t *testing.T) {
	endlessHeaders := func(w io.Writer) error {
		if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\n"); err != nil {
			return err
		}
		line := "X-Padding: " + strings.Repeat("a", 1000) + "\r\n"
		for {
			if _, err := io.WriteString(w, line); err != nil {
				return err
			}
		}
	}
	endless1xx := func(w io.Writer) error {
		for {
			if _, err := io.WriteString(w, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"); err != nil {
				return err
			}
		}
	}
	for name, answer := range map[string]func(io.Writer) error{"endless headers": endlessHeaders, "endless 1xx": endless1xx} {
		addr := hostileUpstream(t, answer)
		p := NewPool(backend("b", addr), TransportOptions{MaxResponseHeaderBytes: 64 << 10, ResponseHeaderTimeout: 5 * time.Second})
		t.Cleanup(p.Close)
		for _, withBody := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/body=%v", name, withBody), func(t *testing.T) {
				var body io.Reader
				method := "GET"
				if withBody {
					method, body = "POST", strings.NewReader("x")
				}
				req, _ := http.NewRequest(method, "http://"+addr+"/", body)
				start := time.Now()
				resp, err := p.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("answer %d accepted", resp.StatusCode)
				}
				if time.Since(start) > 4*time.Second {
					t.Fatalf("failed only after %v (the response header timeout): %v", time.Since(start), err)
				}
			})
		}
	}
}
