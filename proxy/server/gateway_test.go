package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/upstream"
)

func TestRoutingAndHeaders(t *testing.T) {
	a, b := newEcho(t, "a"), newEcho(t, "b")
	sb := newSnapshot()
	ba, bb := sb.backend("ns/a:80", addrOf(a)), sb.backend("ns/b:80", addrOf(b))
	sb.route("foo.com", "/", model.PathPrefix, single("a", ba))
	sb.route("foo.com", "/api", model.PathPrefix, single("b", bb))
	sb.route("foo.com", "/api", model.PathExact, single("a", ba))
	sb.route("*.foo.com", "/", model.PathPrefix, single("b", bb))
	g, _ := runGateway(t, sb.s, Options{})

	cases := []struct {
		host, path, want string
	}{
		{"foo.com", "/x", "a"},
		{"foo.com", "/api/v1?q=1", "b"},
		{"foo.com", "/api", "a"},
		{"FOO.COM:8080", "/api/", "b"},
		{"bar.foo.com", "/", "b"},
	}
	for _, tc := range cases {
		t.Run(tc.host+tc.path, func(t *testing.T) {
			code, _, body := get(t, nil, url(g, "http", tc.path), tc.host, nil)
			if code != 200 {
				t.Fatalf("status %d: %s", code, body)
			}
			if e := decodeEcho(t, body); e.Name != tc.want {
				t.Fatalf("served by %s, want %s", e.Name, tc.want)
			}
		})
	}
	t.Run("unknown host is 404", func(t *testing.T) {
		if code, _, _ := get(t, nil, url(g, "http", "/"), "a.b.foo.com", nil); code != 404 {
			t.Fatalf("status %d, want 404", code)
		}
	})
	t.Run("forwarding headers", func(t *testing.T) {
		code, hdr, body := get(t, nil, url(g, "http", "/x?y=1"), "foo.com", map[string]string{
			"X-Forwarded-For":     "203.0.113.9",
			"Connection":          "X-Private, keep-alive",
			"X-Private":           "secret",
			"Keep-Alive":          "timeout=1",
			"Proxy-Authorization": "Basic eA==",
			"Te":                  "gzip",
			"X-Kept":              "yes",
		})
		if code != 200 {
			t.Fatalf("status %d", code)
		}
		e := decodeEcho(t, body)
		if got := e.Header.Get("X-Forwarded-For"); got != "203.0.113.9, 127.0.0.1" {
			t.Errorf("X-Forwarded-For %q", got)
		}
		if got := e.Header.Get("X-Forwarded-Proto"); got != "http" {
			t.Errorf("X-Forwarded-Proto %q", got)
		}
		if got := e.Header.Get("X-Forwarded-Host"); got != "foo.com" {
			t.Errorf("X-Forwarded-Host %q", got)
		}
		if e.Host != "foo.com" || e.Path != "/x" || e.Query != "y=1" {
			t.Errorf("upstream saw host %q path %q query %q", e.Host, e.Path, e.Query)
		}
		for _, h := range []string{"X-Private", "Keep-Alive", "Proxy-Authorization", "Te"} {
			if v := e.Header.Get(h); v != "" {
				t.Errorf("hop-by-hop %s reached the upstream: %q", h, v)
			}
		}
		if e.Header.Get("X-Kept") != "yes" {
			t.Error("end-to-end header lost")
		}
		if hdr.Get("X-Upstream-Hop") != "" || hdr.Get("Keep-Alive") != "" {
			t.Errorf("hop-by-hop response headers reached the client: %v", hdr)
		}
		if hdr.Get("X-Upstream") != "a" {
			t.Errorf("response header lost: %v", hdr)
		}
	})
}

func TestErrorsAndRedirect(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	ok := newEcho(t, "ok")

	sb := newSnapshot()
	sb.route("", "/dead", model.PathPrefix, single("dead", sb.backend("ns/dead:80", deadAddr)))
	sb.route("", "/slow", model.PathPrefix, single("slow", sb.backend("ns/slow:80", addrOf(slow))))
	sb.route("", "/empty", model.PathPrefix, single("empty", sb.backend("ns/empty:80")))
	sb.route("", "/nobackend", model.PathPrefix, &model.Cluster{Name: "none"})
	r := sb.route("secure.com", "/", model.PathPrefix, single("ok", sb.backend("ns/ok:80", addrOf(ok))))
	r.RedirectHTTPS = true
	g, _ := runGateway(t, sb.s, Options{HTTPSAddr: "127.0.0.1:8443", Transport: upstream.TransportOptions{ResponseHeaderTimeout: 300 * time.Millisecond}})

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cases := []struct {
		name, host, path string
		want             int
	}{
		{"connection refused is 502", "x", "/dead", 502},
		{"response header timeout is 504", "x", "/slow", 504},
		{"no endpoints is 503", "x", "/empty", 503},
		{"no backend is 503", "x", "/nobackend", 503},
		{"no route is 404", "x", "/other", 404},
		{"TLS vhost redirects", "secure.com", "/a?b=c", 301},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, _ := get(t, noFollow, url(g, "http", tc.path), tc.host, nil)
			if code != tc.want {
				t.Fatalf("status %d, want %d", code, tc.want)
			}
			if code == 301 {
				if loc := hdr.Get("Location"); loc != "https://secure.com:8443/a?b=c" {
					t.Fatalf("Location %q", loc)
				}
			}
		})
	}
}

func TestWebSocketUpgrade(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
			http.Error(w, "not an upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: test\r\n\r\n")
		brw.Flush()
		// Echo lines, upper-cased, until EOF.
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			brw.WriteString(strings.ToUpper(line))
			brw.Flush()
		}
	}))
	defer up.Close()
	sb := newSnapshot()
	sb.route("", "/", model.PathPrefix, single("ws", sb.backend("ns/ws:80", addrOf(up))))
	g, _ := runGateway(t, sb.s, Options{})

	conn, err := net.Dial("tcp", g.Addr("http").String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /chat HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: x\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "test" || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("answer %d %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello\n", "second frame\n"} {
		io.WriteString(conn, msg)
		got, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got != strings.ToUpper(msg) {
			t.Fatalf("echo %q, want %q", got, strings.ToUpper(msg))
		}
	}
}

func TestTLSAndHTTP2(t *testing.T) {
	up := newEcho(t, "tls")
	sb := newSnapshot()
	be := sb.backend("ns/tls:80", addrOf(up))
	sb.route("secure.test", "/", model.PathPrefix, single("s", be))
	sb.route("*.wild.test", "/", model.PathPrefix, single("w", be))
	exactCert := selfSigned(t, "secure.test")
	wildCert := selfSigned(t, "*.wild.test")
	sb.s.Certificates = []model.Certificate{
		{Hosts: []string{"secure.test"}, Certificate: exactCert, MinVersion: tls.VersionTLS13},
		{Hosts: []string{"*.wild.test"}, Certificate: wildCert},
	}
	g, _ := runGateway(t, sb.s, Options{})
	addr := g.Addr("https").String()

	client := func(serverName string, cert *tls.Certificate, maxVersion uint16) *hostClient {
		pool := x509.NewCertPool()
		pool.AddCert(cert.Leaf)
		return &hostClient{host: serverName, c: &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{ServerName: serverName, RootCAs: pool, MaxVersion: maxVersion},
			ForceAttemptHTTP2: true,
		}, Timeout: 10 * time.Second}}
	}
	t.Run("h2 by ALPN with the exact certificate", func(t *testing.T) {
		resp, err := client("secure.test", exactCert, 0).Get("https://" + addr + "/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Errorf("protocol %s, want HTTP/2", resp.Proto)
		}
		e := decodeEcho(t, string(body))
		if e.Host != "secure.test" || e.Header.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("upstream saw host %q proto %q", e.Host, e.Header.Get("X-Forwarded-Proto"))
		}
		if resp.TLS.Version != tls.VersionTLS13 {
			t.Errorf("TLS version %x", resp.TLS.Version)
		}
	})
	t.Run("wildcard certificate by SNI", func(t *testing.T) {
		resp, err := client("a.wild.test", wildCert, 0).Get("https://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("minimum version of the entry is enforced", func(t *testing.T) {
		if _, err := client("secure.test", exactCert, tls.VersionTLS12).Get("https://" + addr + "/"); err == nil {
			t.Fatal("TLS 1.2 handshake accepted for a 1.3-only host")
		}
	})
	for _, name := range []string{"other.test", "a.b.wild.test", ""} {
		t.Run("no certificate for "+name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
			if err == nil {
				conn.Close()
				t.Fatal("handshake succeeded without a matching certificate")
			}
		})
	}
}

func TestSoleCertificateWithoutSNI(t *testing.T) {
	sb := newSnapshot()
	sb.s.Certificates = []model.Certificate{{Hosts: []string{"only.test"}, Certificate: selfSigned(t, "only.test")}}
	g, _ := runGateway(t, sb.s, Options{})
	conn, err := tls.Dial("tcp", g.Addr("https").String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("handshake without SNI and one certificate: %v", err)
	}
	conn.Close()
}

func TestSlowlorisAndHeaderLimit(t *testing.T) {
	sb := newSnapshot()
	sb.route("", "/", model.PathPrefix, single("a", sb.backend("ns/a:80", addrOf(newEcho(t, "a")))))
	g, _ := runGateway(t, sb.s, Options{ReadHeaderTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4096})

	t.Run("slow headers are cut off", func(t *testing.T) {
		conn, err := net.Dial("tcp", g.Addr("http").String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n")
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		_, err = io.ReadAll(conn)
		if err != nil {
			t.Fatalf("connection not closed by the server: %v", err)
		}
		if time.Since(start) > 9*time.Second {
			t.Fatal("server kept the slow connection open")
		}
	})
	t.Run("oversized headers get 431", func(t *testing.T) {
		code, _, _ := get(t, nil, url(g, "http", "/"), "x", map[string]string{"X-Big": strings.Repeat("a", 16<<10)})
		if code != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("status %d, want 431", code)
		}
	})
}

func TestStreamedBodyEarlyAnswer(t *testing.T) {
	// The upstream answers before reading the whole body; the client keeps
	// sending. Full duplex keeps the exchange intact.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		buf := make([]byte, 10)
		io.ReadFull(r.Body, buf)
		io.WriteString(w, "early;")
		w.(http.Flusher).Flush()
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d", n+10)
	}))
	defer up.Close()
	sb := newSnapshot()
	sb.route("", "/", model.PathPrefix, single("a", sb.backend("ns/a:80", addrOf(up))))
	g, _ := runGateway(t, sb.s, Options{})
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 20; i++ {
			pw.Write(make([]byte, 1000))
			time.Sleep(time.Millisecond)
		}
		pw.Close()
	}()
	resp, err := http.Post(url(g, "http", "/up"), "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "early;20000" {
		t.Fatalf("answer %q, want early;20000 (the upstream counts the bytes it received)", b)
	}
}

func TestWeightsEndToEnd(t *testing.T) {
	a, b := newEcho(t, "a"), newEcho(t, "b")
	sb := newSnapshot()
	sb.route("", "/", model.PathPrefix, &model.Cluster{Name: "split", Backends: []model.WeightedBackend{
		{Backend: sb.backend("ns/a:80", addrOf(a)), Weight: 3},
		{Backend: sb.backend("ns/b:80", addrOf(b)), Weight: 1},
	}})
	g, _ := runGateway(t, sb.s, Options{})
	counts := map[string]int{}
	const n = 800
	for i := 0; i < n; i++ {
		_, hdr, _ := get(t, nil, url(g, "http", "/"), "x", nil)
		counts[hdr.Get("X-Upstream")]++
	}
	// 800 draws at p=0.75: the standard deviation is 1.5%; allow 5%.
	if share := float64(counts["a"]) / n; share < 0.70 || share > 0.80 {
		t.Fatalf("share of a %.3f, want 0.75 ± 0.05 (%v)", share, counts)
	}
}

func TestAdminEndpoints(t *testing.T) {
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	sb := newSnapshot()
	be := sb.backend("ns/down:80", deadAddr)
	be.HealthCheck = &model.HealthCheck{Path: "/healthz", Interval: time.Hour, Timeout: time.Second}
	sb.route("foo.com", "/api", model.PathPrefix, single("down", be))
	sb.s.Objects = []model.ObjectStatus{{Object: model.ObjectRef{Kind: "Ingress", Namespace: "ns", Name: "ing"}, Status: model.StatusValid, InUse: true}}
	sb.s.Fallback = model.FallbackReport{Status: model.FallbackTriggered,
		BrokenObjects:   []model.FallbackObject{{Kind: "Service", Namespace: "ns", Name: "gone"}},
		ExcludedObjects: []model.FallbackObject{{Group: "networking.k8s.io", Kind: "Ingress", Namespace: "ns", Name: "x", CausingObjects: []string{"Service:ns/gone"}}},
	}
	g, _ := runGateway(t, sb.s, Options{PID: 4242})
	adminURL := func(p string) string { return url(g, "admin", p) }

	code, hdr, body := get(t, nil, adminURL("/readyz?verbose"), "", nil)
	if code != 500 || !strings.Contains(body, "[-]dependency/upstreams failed: no healthy endpoint in backends ns/down:80") {
		t.Errorf("readyz %d: %s", code, body)
	}
	if hdr.Get("X-Revgate-Revision") != "3" || hdr.Get("X-Revgate-Pid") != "4242" {
		t.Errorf("identity headers %v", hdr)
	}
	for _, want := range []string{"[+]fallback ok: triggered: 1 broken, 1 excluded, 0 backfilled objects", "[+]shutdown ok", "[+]listeners ok", "readyz check failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("readyz lacks %q: %s", want, body)
		}
	}
	if code, _, body := get(t, nil, adminURL("/readyz?exclude=dependency/upstreams"), "", nil); code != 200 || body != "ok" {
		t.Errorf("readyz with exclude %d %q", code, body)
	}
	if code, _, body := get(t, nil, adminURL("/healthz"), "", nil); code != 200 || body != "ok" {
		t.Errorf("healthz %d %q", code, body)
	}
	if code, _, body := get(t, nil, adminURL("/livez?verbose"), "", nil); code != 200 || body != "[+]ping ok\n[+]listeners ok\nlivez check passed\n" {
		t.Errorf("livez %d %q", code, body)
	}
	// Traffic to the unhealthy backend is refused with 503 and counted.
	if code, _, _ := get(t, nil, url(g, "http", "/api"), "foo.com", nil); code != 503 {
		t.Errorf("route with no healthy endpoint answered %d", code)
	}
	_, _, metrics := get(t, nil, adminURL("/metrics"), "", nil)
	for _, want := range []string{
		`revgate_http_requests_total{code="503",route="foo.com/api (Prefix)"} 1`,
		`revgate_upstream_errors_total{backend="ns/down:80",kind="no_healthy_endpoint"} 1`,
		`revgate_config_objects{kind="Ingress",status="valid"} 1`,
		`revgate_fallback_triggered 1`,
		`revgate_fallback_objects{state="excluded"} 1`,
		`revgate_endpoint_healthy{backend="ns/down:80",endpoint="` + deadAddr + `"} 0`,
		`revgate_config_translation_duration_seconds`,
		`revgate_http_request_duration_seconds_bucket`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	_, _, fb := get(t, nil, adminURL("/debug/config/fallback"), "", nil)
	var report model.FallbackReport
	if err := json.Unmarshal([]byte(fb), &report); err != nil || report.Status != model.FallbackTriggered || len(report.ExcludedObjects) != 1 ||
		report.ExcludedObjects[0].CausingObjects[0] != "Service:ns/gone" {
		t.Errorf("fallback document %s (%v)", fb, err)
	}
	_, _, routes := get(t, nil, adminURL("/debug/config/routes"), "", nil)
	var docs []routeDoc
	if err := json.Unmarshal([]byte(routes), &docs); err != nil || len(docs) != 1 || docs[0].Host != "foo.com" ||
		docs[0].Backends[0].Endpoints[0].Address != deadAddr || docs[0].Backends[0].Endpoints[0].Healthy {
		t.Errorf("routes document %s (%v)", routes, err)
	}
	_, _, status := get(t, nil, adminURL("/debug/config/status"), "", nil)
	if !strings.Contains(status, `"status": "valid"`) {
		t.Errorf("status document %s", status)
	}
}

func TestConfigCheckWithFallbackOff(t *testing.T) {
	sb := newSnapshot()
	sb.s.Mode = model.FallbackOff
	sb.s.Problems = []model.Problem{{Object: model.ObjectRef{Kind: "Ingress", Namespace: "ns", Name: "bad"}, Message: "service ns/gone not found", Severity: model.SeverityError}}
	g, _ := runGateway(t, sb.s, Options{})
	code, _, body := get(t, nil, url(g, "admin", "/readyz?verbose"), "", nil)
	if code != 500 || !strings.Contains(body, "[-]config failed: fallback is off and 1 configuration errors: Ingress/ns/bad: service ns/gone not found") {
		t.Errorf("readyz %d: %s", code, body)
	}
	if code, _, _ := get(t, nil, url(g, "admin", "/healthz"), "", nil); code != 200 {
		t.Errorf("healthz %d: a loaded configuration is healthy", code)
	}
}

type recordingNotifier struct {
	mu     sync.Mutex
	states []string
}

func (n *recordingNotifier) Notify(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.states = append(n.states, s)
}

func (n *recordingNotifier) all() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.states, "|")
}

func TestGracefulDrain(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		io.WriteString(w, "finished")
	}))
	defer up.Close()
	sb := newSnapshot()
	sb.route("", "/", model.PathPrefix, single("a", sb.backend("ns/a:80", addrOf(up))))
	n := &recordingNotifier{}
	clk := newFakeClock()
	const delay = 2 * time.Second
	g, stop := runGateway(t, sb.s, Options{Clock: clk, ShutdownDelay: delay, DrainTimeout: 10 * time.Second, Notifier: n})
	adminAddr := url(g, "admin", "/readyz?verbose")

	result := make(chan string, 1)
	go func() {
		resp, err := http.Get(url(g, "http", "/slow"))
		if err != nil {
			result <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- string(b)
	}()
	<-started
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// During the delay the admin endpoint answers not ready, and traffic is
	// still served: the delay lasts until the clock passes it.
	waitUntil(t, 5*time.Second, "the shutdown delay to begin", func() bool { return clk.Pending(delay) > 0 })
	code, _, body := get(t, nil, adminAddr, "", nil)
	if code != 500 || !strings.Contains(body, "[-]shutdown failed: shutting down") {
		t.Errorf("readyz during the shutdown delay %d:\n%s", code, body)
	}
	if code, _, body := get(t, nil, url(g, "http", "/"), "x", nil); code != 200 || body != "finished" {
		t.Errorf("a new request during the shutdown delay: %d %q, want it served", code, body)
	}
	clk.Step(delay)
	select {
	case <-stopped:
		t.Fatal("gateway stopped with a request in flight")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if got := <-result; got != "finished" {
		t.Fatalf("in-flight request got %q", got)
	}
	<-stopped
	if _, err := net.DialTimeout("tcp", g.Addr("http").String(), time.Second); err == nil {
		t.Error("listener still accepts after shutdown")
	}
	if got := n.all(); !strings.HasPrefix(got, "READY=1|STATUS=serving revision 3") || !strings.Contains(got, "STOPPING=1") {
		t.Errorf("notifications %q", got)
	}
}

func TestReusePort(t *testing.T) {
	l1, err := listenReusePort(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := listenReusePort(context.Background(), l1.Addr().String())
	if err != nil {
		t.Fatalf("second bind on the same port: %v", err)
	}
	l2.Close()
}

// hostClient sends requests with its Host header (the SNI name) to a
// listener addressed by IP.
type hostClient struct {
	host string
	c    *http.Client
}

func (h *hostClient) Get(u string) (*http.Response, error) {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return nil, err
	}
	req.Host = h.host
	return h.c.Do(req)
}

func TestCanaryEndToEnd(t *testing.T) {
	a, b := newEcho(t, "primary"), newEcho(t, "canary")
	sb := newSnapshot()
	pct := 30.0
	c := single("c", sb.backend("ns/a:80", addrOf(a)))
	c.Canary = &model.Canary{Backend: sb.backend("ns/b:80", addrOf(b)), Percentage: &pct, Steps: 100,
		Hash: model.CanaryHashConsumer, ConsumerHeader: "X-Consumer-ID", OverrideHeader: "X-Canary"}
	sb.route("", "/", model.PathPrefix, c)
	g, _ := runGateway(t, sb.s, Options{})
	served := func(hdr map[string]string) string {
		_, h, _ := get(t, nil, url(g, "http", "/"), "x", hdr)
		return h.Get("X-Upstream")
	}
	if got := served(map[string]string{"X-Canary": "always"}); got != "canary" {
		t.Errorf("override always went to %s", got)
	}
	if got := served(map[string]string{"X-Canary": "never", "X-Consumer-ID": "u1"}); got != "primary" {
		t.Errorf("override never went to %s", got)
	}
	canary := 0
	const users = 400
	for i := 0; i < users; i++ {
		id := map[string]string{"X-Consumer-ID": fmt.Sprintf("user-%d", i)}
		first := served(id)
		if served(id) != first {
			t.Fatalf("user-%d flip-flops", i)
		}
		if first == "canary" {
			canary++
		}
	}
	// 400 users at 30%: the standard deviation is 2.3%; allow 8%.
	if share := float64(canary) / users; share < 0.22 || share > 0.38 {
		t.Errorf("canary share %.3f, want 0.30 ± 0.08", share)
	}
}

func TestWatchdog(t *testing.T) {
	clk := newFakeClock()
	n := &recordingNotifier{}
	runGateway(t, newSnapshot().s, Options{Clock: clk, Notifier: n, WatchdogInterval: 10 * time.Second})
	waitUntil(t, 10*time.Second, "the watchdog ticker", func() bool { return clk.Tickers(10*time.Second) == 1 })
	if strings.Contains(n.all(), "WATCHDOG=1") {
		t.Fatalf("watchdog ping before the interval passed: %q", n.all())
	}
	clk.Step(10 * time.Second)
	waitUntil(t, 10*time.Second, "a watchdog ping", func() bool { return strings.Contains(n.all(), "WATCHDOG=1") })
}

// TestJoinSharedPortOnceReady: while another process holds the traffic
// port, the gateway binds it only once its readiness checks pass, so the
// kernel never hands it connections it cannot serve.
func TestJoinSharedPortOnceReady(t *testing.T) {
	other, err := listenReusePort(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	shared := other.Addr().String()

	// The backend's only endpoint fails its health checks at first.
	var healthy atomic.Bool
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") == "revgate-healthcheck" {
			defer hits.Add(1)
		}
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "served")
	}))
	defer up.Close()
	sb := newSnapshot()
	be := sb.backend("ns/a:80", addrOf(up))
	const interval = time.Second
	be.HealthCheck = &model.HealthCheck{Path: "/", Interval: interval, Timeout: 5 * time.Second}
	sb.route("", "/", model.PathPrefix, single("a", be))
	n := &recordingNotifier{}
	clk := newFakeClock()
	g, _ := runGateway(t, sb.s, Options{Clock: clk, HTTPAddr: shared, Notifier: n})

	// Health checks and join polls come and go while the upstream is down.
	for i := range 3 {
		waitUntil(t, 10*time.Second, "the health check ticker", func() bool { return clk.Tickers(interval) == 1 })
		if g.Addr("http") != nil {
			t.Fatal("joined the shared port while not ready")
		}
		before := hits.Load()
		clk.Step(interval)
		waitUntil(t, 10*time.Second, fmt.Sprintf("health check %d", i+2), func() bool { return hits.Load() > before })
	}
	if g.Addr("http") != nil || clk.Tickers(joinPollInterval) != 1 {
		t.Fatal("joined the shared port while not ready")
	}
	if strings.Contains(n.all(), "READY=1") {
		t.Fatal("READY=1 before serving traffic")
	}
	code, _, body := get(t, nil, url(g, "admin", "/readyz?verbose"), "", nil)
	if code != 500 || !strings.Contains(body, "[+]listeners ok: waiting until ready to join "+shared) ||
		!strings.Contains(body, "[-]dependency/upstreams failed") {
		t.Fatalf("readyz while waiting %d:\n%s", code, body)
	}
	if strings.Count(body, "[-]") != 1 {
		t.Fatalf("only the dependency check may fail while waiting:\n%s", body)
	}

	// The next health check passes; the join poll after it joins.
	healthy.Store(true)
	before := hits.Load()
	clk.Step(interval)
	waitUntil(t, 10*time.Second, "the passing health check", func() bool { return hits.Load() > before })
	deadline := time.Now().Add(10 * time.Second)
	for g.Addr("http") == nil {
		if time.Now().After(deadline) {
			t.Fatal("did not join the shared port after becoming ready")
		}
		clk.Step(joinPollInterval)
		time.Sleep(10 * time.Millisecond)
	}
	// The other process leaves; the gateway now takes every connection.
	other.Close()
	if code, _, body := get(t, nil, "http://"+shared+"/", "x", nil); code != 200 || body != "served" {
		t.Fatalf("after joining: %d %q", code, body)
	}
	waitUntil(t, 10*time.Second, "READY=1 after joining", func() bool { return strings.Contains(n.all(), "READY=1") })
	if code, _, body := get(t, nil, url(g, "admin", "/readyz?verbose"), "", nil); code != 200 {
		t.Fatalf("readyz after joining %d:\n%s", code, body)
	}
}

// TestDrainAnswersAcceptedConnection guards against golang/go#75591: a
// connection accepted before the listener closed whose first request
// arrives once shutdown has begun must still be answered.
func TestDrainAnswersAcceptedConnection(t *testing.T) {
	sb := newSnapshot()
	sb.route("", "/", model.PathPrefix, single("a", sb.backend("ns/a:80", addrOf(newEcho(t, "a")))))
	clk := newFakeClock()
	g, stop := runGateway(t, sb.s, Options{Clock: clk, AcceptGrace: DefaultAcceptGrace})
	addr := g.Addr("http").String()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(50 * time.Millisecond) // accepted by the server by now
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// The listener is closed and the grace runs until the clock passes it.
	waitUntil(t, 5*time.Second, "the accept grace to begin", func() bool { return clk.Pending(DefaultAcceptGrace) > 0 })
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("listener still open during the accept grace")
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("request on a connection accepted before shutdown got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("answer %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	clk.Step(DefaultAcceptGrace)
	<-stopped
}
