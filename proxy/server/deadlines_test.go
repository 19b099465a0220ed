package server

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// timeoutGateway serves /big (an upstream that streams without end and
// reports when a write fails), /slow (an upstream that answers after
// slowFor), /upload (an upstream that reads the whole body) and /echo,
// with the given send and client body timeouts, on plain HTTP and TLS.
func timeoutGateway(t *testing.T, send, body, slowFor time.Duration) (*Gateway, *tls.Certificate, <-chan string) {
	t.Helper()
	stopped := make(chan string, 8)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				stopped <- r.URL.Path
				return
			}
		}
	}))
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/quiet-end") {
			// A stream whose end comes after a quiet spell.
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			time.Sleep(slowFor)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/drip") {
			// One byte, a pause, one more: a stream with a quiet spell.
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			time.Sleep(slowFor)
			io.WriteString(w, "b")
			return
		}
		time.Sleep(slowFor)
		if strings.HasSuffix(r.URL.Path, "/empty") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		io.WriteString(w, "late")
	}))
	upload := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		io.WriteString(w, "uploaded")
	}))
	for _, s := range []*httptest.Server{big, slow, upload} {
		t.Cleanup(s.Close)
	}
	echo := newEcho(t, "echo")
	sb := newSnapshot()
	sb.route("", "/big", model.PathPrefix, single("big", sb.backend("ns/big:80", addrOf(big))))
	sb.route("", "/slow", model.PathPrefix, single("slow", sb.backend("ns/slow:80", addrOf(slow))))
	sb.route("", "/upload", model.PathPrefix, single("upload", sb.backend("ns/upload:80", addrOf(upload))))
	sb.route("", "/echo", model.PathPrefix, single("echo", sb.backend("ns/echo:80", addrOf(echo))))
	cert := selfSigned(t, "gw.test")
	sb.s.Certificates = []model.Certificate{{Hosts: []string{"gw.test"}, Certificate: cert}}
	g, _ := runGateway(t, sb.s, Options{SendTimeout: send, ClientBodyTimeout: body})
	return g, cert, stopped
}

// A client that stops reading a response holds no upstream for longer than
// the send timeout: the gateway closes the connection (HTTP/1) or resets
// the stream (HTTP/2) and the upstream's writes fail. Before, the upstream
// blocked for as long as the client stayed connected.
func TestSendTimeout(t *testing.T) {
	g, cert, stopped := timeoutGateway(t, 300*time.Millisecond, 0, 0)
	// Each request has its own path, so that the end of an earlier one
	// (its connection closed when its subtest ended) does not count.
	waitStopped := func(t *testing.T, path string) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case p := <-stopped:
				if p == path {
					return
				}
			case <-deadline:
				t.Fatalf("the upstream still writes %s 15s after the client stopped reading", path)
			}
		}
	}
	t.Run("http/1.1", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "GET /big/h1 HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		waitStopped(t, "/big/h1")
	})
	t.Run("http/1.1, second request of a connection", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "GET /echo HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		if resp, body := rc.response(t); resp.StatusCode != 200 {
			t.Fatalf("first request: %d (%q)", resp.StatusCode, body)
		}
		rc.send(t, "GET /big/second HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		waitStopped(t, "/big/second")
	})
	t.Run("http/1.1 over TLS", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("https").String(), tlsClientConfig(cert, "http/1.1"))
		rc.send(t, "GET /big/tls HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		waitStopped(t, "/big/tls")
	})
	t.Run("h2", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsClientConfig(cert), ForceAttemptHTTP2: true}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(url(g, "https", "/big/h2"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
		}
		waitStopped(t, "/big/h2") // the body is never read
	})
}

// The send timeout's deadline is moved before each answer: on a keep-alive
// connection idle for longer than the timeout, the gateway's own pages and
// answers of upstreams slower than the timeout, with or without a body,
// are written as usual.
func TestSendTimeoutSparesSlowAndIdle(t *testing.T) {
	g, _, _ := timeoutGateway(t, 300*time.Millisecond, 0, time.Second)
	rc := dialRaw(t, g.Addr("http").String(), nil)
	for i, step := range []struct {
		path string
		code int
	}{{"/echo/1", 200}, {"/nowhere", 404}, {"/slow/empty", 204}, {"/slow", 200}, {"/echo/2", 200}} {
		if i > 0 {
			time.Sleep(time.Second)
		}
		rc.send(t, "GET "+step.path+" HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		resp, body := rc.response(t)
		if resp.StatusCode != step.code {
			t.Fatalf("%s: status %d (%q), want %d", step.path, resp.StatusCode, body, step.code)
		}
	}
}

// The timeouts bound waits for the client, not for the upstream: a POST
// whose body was read whole waits as long as its upstream takes, and a
// response stream may pause for longer than the send timeout, on HTTP/1
// and on HTTP/2 (where a deadline left in place would reset the stream).
func TestTimeoutsSpareQuietUpstreams(t *testing.T) {
	g, cert, _ := timeoutGateway(t, 300*time.Millisecond, 300*time.Millisecond, time.Second)
	h1 := &http.Client{}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsClientConfig(cert), ForceAttemptHTTP2: true}}
	defer h2.CloseIdleConnections()
	for _, tc := range []struct {
		name, method, listener, path, want string
		c                                  *http.Client
	}{
		{"post to a slow upstream", "POST", "http", "/slow", "late", h1},
		{"post to a slow upstream/h2", "POST", "https", "/slow", "late", h2},
		{"quiet stream", "GET", "http", "/slow/drip", "ab", h1},
		{"quiet stream/h2", "GET", "https", "/slow/drip", "ab", h2},
		{"stream ending after a quiet spell", "GET", "http", "/slow/quiet-end", "a", h1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url(g, tc.listener, tc.path), strings.NewReader("body"))
			if tc.method == "GET" {
				req.Body, req.ContentLength = nil, 0
			}
			resp, err := tc.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || string(b) != tc.want {
				t.Fatalf("%s: status %d body %q (%v), want 200 %q", resp.Proto, resp.StatusCode, b, err, tc.want)
			}
			if tc.c == h2 && resp.ProtoMajor != 2 {
				t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
			}
		})
	}
}

// A client that stops sending its request body gets 408 and its connection
// closed after the client body timeout, as from nginx; the upstream does
// not wait for the rest. A body that keeps coming, however slowly, is
// whole.
func TestClientBodyTimeout(t *testing.T) {
	g, cert, _ := timeoutGateway(t, 0, 300*time.Millisecond, 0)
	for _, tc := range []struct{ name, request string }{
		{"content-length", "POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 1000\r\n\r\n0123456789"},
		{"chunked", "POST /upload HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"},
	} {
		for _, tlsOn := range []bool{false, true} {
			name, addr, conf := tc.name, g.Addr("http").String(), (*tls.Config)(nil)
			if tlsOn {
				name, addr, conf = name+"/tls", g.Addr("https").String(), tlsClientConfig(cert, "http/1.1")
			}
			t.Run(name, func(t *testing.T) {
				rc := dialRaw(t, addr, conf)
				rc.send(t, tc.request)
				resp, body := rc.response(t)
				if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
					t.Fatalf("status %d (%q) close %v, want 408 and Connection: close", resp.StatusCode, body, resp.Close)
				}
				if !rc.closed(t) {
					t.Error("connection still open after the 408")
				}
			})
		}
	}
	t.Run("h2", func(t *testing.T) {
		c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsClientConfig(cert), ForceAttemptHTTP2: true}}
		defer c.CloseIdleConnections()
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("0123456789")) // then nothing
		req, _ := http.NewRequest("POST", url(g, "https", "/upload"), pr)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("%s status %d, want HTTP/2 408", resp.Proto, resp.StatusCode)
		}
	})
	t.Run("slow but steady", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "POST /upload HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 8\r\n\r\n")
		for range 8 {
			time.Sleep(100 * time.Millisecond)
			rc.send(t, "x")
		}
		resp, body := rc.response(t)
		if resp.StatusCode != 200 || body != "uploaded" {
			t.Fatalf("status %d body %q", resp.StatusCode, body)
		}
	})
}
