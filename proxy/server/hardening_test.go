package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
)

// rawConn speaks HTTP/1.1 byte for byte, so that requests reach the gateway
// exactly as written (no client normalizes them).
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string, tlsConf *tls.Config) *rawConn {
	t.Helper()
	var (
		c   net.Conn
		err error
	)
	if tlsConf != nil {
		c, err = tls.Dial("tcp", addr, tlsConf)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

func (rc *rawConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// response reads one response and its whole body.
func (rc *rawConn) response(t *testing.T) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	resp.Body.Close()
	return resp, string(b)
}

// closed reports whether the gateway closed the connection (after what was
// read): the next read ends with EOF or a reset, without more data.
func (rc *rawConn) closed(t *testing.T) bool {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b, err := rc.br.ReadByte()
	if err == nil {
		rest, _ := rc.br.Peek(rc.br.Buffered())
		t.Logf("more data after the response: %q", string(b)+string(rest))
		return false
	}
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// counted is an echo upstream that counts its requests.
type counted struct {
	*httptest.Server
	n atomic.Int64
}

func newCounted(t *testing.T, name string) *counted {
	c := &counted{}
	inner := newEcho(t, name).Config.Handler
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Server.Close)
	return c
}

// confusionGateway serves /public and /admin from two upstreams on one host,
// the set-up of the path-confusion report, with a TLS certificate for it.
func confusionGateway(t *testing.T, paths route.PathOptions) (*Gateway, *counted, *counted, *tls.Certificate) {
	t.Helper()
	pub, adm := newCounted(t, "public"), newCounted(t, "admin")
	sb := newSnapshot()
	sb.route("", "/public", model.PathPrefix, single("public", sb.backend("ns/public:80", addrOf(pub.Server))))
	sb.route("", "/admin", model.PathPrefix, single("admin", sb.backend("ns/admin:80", addrOf(adm.Server))))
	cert := selfSigned(t, "gw.test")
	sb.s.Certificates = []model.Certificate{{Hosts: []string{"gw.test"}, Certificate: cert}}
	g, _ := runGateway(t, sb.s, Options{Paths: paths})
	return g, pub, adm, cert
}

func tlsClientConfig(cert *tls.Certificate, protos ...string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	return &tls.Config{ServerName: "gw.test", RootCAs: pool, NextProtos: protos}
}

// TestPathConfusion sends every spelling of the dot-segment bypass over the
// plain listener, HTTP/1.1 over TLS and HTTP/2: each request is refused or
// reaches the upstream of the route its normalized path names, with exactly
// that path. Before normalization, /public/%2e%2e/admin/x reached the public
// upstream as /public/../admin/x.
func TestPathConfusion(t *testing.T) {
	type want struct {
		code     int
		upstream string // "" when refused
		uri      string
	}
	cases := []struct {
		name   string
		paths  route.PathOptions
		target string
		want   want
	}{
		{"%2e%2e", route.PathOptions{}, "/public/%2e%2e/admin/x", want{200, "admin", "/admin/x"}},
		{".%2e", route.PathOptions{}, "/public/.%2e/admin/x", want{200, "admin", "/admin/x"}},
		{"%2E%2E", route.PathOptions{}, "/public/%2E%2E/admin/x", want{200, "admin", "/admin/x"}},
		{"literal ..", route.PathOptions{}, "/public/../admin/x", want{200, "admin", "/admin/x"}},
		{"..%2f refused", route.PathOptions{}, "/public/..%2fadmin/x", want{400, "", ""}},
		{"%2e%2e%2f refused", route.PathOptions{}, "/public/%2e%2e%2fadmin/x", want{400, "", ""}},
		{"..%5c refused", route.PathOptions{}, "/public/..%5cadmin/x", want{400, "", ""}},
		{"..;/ refused", route.PathOptions{}, "/public/..;/admin/x", want{400, "", ""}},
		{"above the root refused", route.PathOptions{}, "/../admin/x", want{400, "", ""}},
		{"NUL refused", route.PathOptions{}, "/public/a%00b", want{400, "", ""}},
		{"inside public", route.PathOptions{}, "/public/a/./b/../c?q=1", want{200, "public", "/public/a/c?q=1"}},
		{"unreserved decoded", route.PathOptions{}, "/public/%7euser/%41", want{200, "public", "/public/~user/A"}},
		{"slashes merged", route.PathOptions{}, "//public///x", want{200, "public", "/public/x"}},
		{"..%2f unescaped", route.PathOptions{EscapedSlashes: route.EscapedSlashesUnescape}, "/public/..%2fadmin/x", want{200, "admin", "/admin/x"}},
		{"%2F kept as data", route.PathOptions{EscapedSlashes: route.EscapedSlashesKeep}, "/public/a%2fb", want{200, "public", "/public/a%2Fb"}},
		{"slashes kept", route.PathOptions{KeepRepeatedSlashes: true}, "/public//x", want{200, "public", "/public//x"}},
	}
	byPaths := map[route.PathOptions]struct {
		g        *Gateway
		pub, adm *counted
		cert     *tls.Certificate
	}{}
	for _, c := range cases {
		if _, ok := byPaths[c.paths]; !ok {
			g, pub, adm, cert := confusionGateway(t, c.paths)
			byPaths[c.paths] = struct {
				g        *Gateway
				pub, adm *counted
				cert     *tls.Certificate
			}{g, pub, adm, cert}
		}
	}
	check := func(t *testing.T, w want, code int, body string) {
		t.Helper()
		if code != w.code {
			t.Fatalf("status %d, want %d (body %q)", code, w.code, body)
		}
		if w.upstream == "" {
			return
		}
		e := decodeEcho(t, body)
		if e.Name != w.upstream || e.URI != w.uri {
			t.Fatalf("reached %s with %q, want %s with %q", e.Name, e.URI, w.upstream, w.uri)
		}
	}
	for _, c := range cases {
		gw := byPaths[c.paths]
		request := "GET " + c.target + " HTTP/1.1\r\nHost: gw.test\r\n\r\n"
		t.Run(c.name+"/plain", func(t *testing.T) {
			rc := dialRaw(t, gw.g.Addr("http").String(), nil)
			rc.send(t, request)
			resp, body := rc.response(t)
			check(t, c.want, resp.StatusCode, body)
			if resp.Header.Get("Server") != "revgate" {
				t.Errorf("Server header %q", resp.Header.Get("Server"))
			}
		})
		t.Run(c.name+"/tls", func(t *testing.T) {
			rc := dialRaw(t, gw.g.Addr("https").String(), tlsClientConfig(gw.cert, "http/1.1"))
			rc.send(t, request)
			resp, body := rc.response(t)
			check(t, c.want, resp.StatusCode, body)
		})
		t.Run(c.name+"/h2", func(t *testing.T) {
			if strings.HasPrefix(c.target, "//") {
				t.Skip("an HTTP/2 client cannot send a :path starting with //")
			}
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: tlsClientConfig(gw.cert), ForceAttemptHTTP2: true,
			}}
			req, err := http.NewRequest("GET", "https://"+gw.g.Addr("https").String()+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			target, query, _ := strings.Cut(c.target, "?")
			req.URL.Opaque, req.URL.RawQuery, req.Host = target, query, "gw.test"
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Fatalf("protocol %s", resp.Proto)
			}
			b, _ := io.ReadAll(resp.Body)
			check(t, c.want, resp.StatusCode, string(b))
		})
	}
}

// TestRedirectUsesNormalizedPath: the 301 of a TLS virtual host points at the
// normalized path, never at a form another hop could resolve differently.
func TestRedirectUsesNormalizedPath(t *testing.T) {
	up := newEcho(t, "secure")
	sb := newSnapshot()
	r := sb.route("secure.test", "/", model.PathPrefix, single("s", sb.backend("ns/s:80", addrOf(up))))
	r.RedirectHTTPS = true
	g, _ := runGateway(t, sb.s, Options{HTTPSAddr: "127.0.0.1:0"})
	port := g.httpsPort
	for target, loc := range map[string]string{
		"/public/%2e%2e/admin?q=1": "https://secure.test:" + port + "/admin?q=1",
		"/a//b/./c/":               "https://secure.test:" + port + "/a/b/c/",
	} {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "GET "+target+" HTTP/1.1\r\nHost: secure.test\r\n\r\n")
		resp, _ := rc.response(t)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != loc {
			t.Errorf("%s: %d Location %q, want 301 %q", target, resp.StatusCode, resp.Header.Get("Location"), loc)
		}
	}
}

// TestServerHeader: every answer carries Server: revgate unless the upstream
// sent its own, the gateway's error pages included.
func TestServerHeader(t *testing.T) {
	plain := newEcho(t, "plain")
	branded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "upstream/1.0")
	}))
	t.Cleanup(branded.Close)
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	sb := newSnapshot()
	sb.route("", "/plain", model.PathPrefix, single("plain", sb.backend("ns/plain:80", addrOf(plain))))
	sb.route("", "/branded", model.PathPrefix, single("branded", sb.backend("ns/branded:80", addrOf(branded))))
	sb.route("", "/dead", model.PathPrefix, single("dead", sb.backend("ns/dead:80", deadAddr)))
	sb.route("", "/empty", model.PathPrefix, single("empty", sb.backend("ns/empty:80")))
	g, _ := runGateway(t, sb.s, Options{})
	cases := []struct {
		method, path string
		code         int
		server       string
	}{
		{"GET", "/plain", 200, "revgate"},
		{"GET", "/branded", 200, "upstream/1.0"},
		{"GET", "/dead", 502, "revgate"},
		{"GET", "/empty", 503, "revgate"},
		{"GET", "/nothing", 404, "revgate"},
		{"GET", "/../x", 400, "revgate"},
		{"TRACE", "/plain", 405, "revgate"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rc := dialRaw(t, g.Addr("http").String(), nil)
			rc.send(t, c.method+" "+c.path+" HTTP/1.1\r\nHost: any\r\n\r\n")
			resp, _ := rc.response(t)
			if resp.StatusCode != c.code || resp.Header.Get("Server") != c.server {
				t.Fatalf("%d Server %q, want %d %q", resp.StatusCode, resp.Header.Get("Server"), c.code, c.server)
			}
		})
	}
	t.Run("CONNECT", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "CONNECT "+addrOf(plain)+" HTTP/1.1\r\nHost: "+addrOf(plain)+"\r\n\r\n")
		resp, _ := rc.response(t)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("CONNECT answered %d, want 405", resp.StatusCode)
		}
	})
}

// TestFraming sends ambiguous and malformed framing through raw sockets.
// Each refused request gets 4xx/5xx with Connection: close, the connection
// is closed after it, and nothing smuggled behind it reaches an upstream.
// Before the gate, a request with both Content-Length and Transfer-Encoding
// was served and the request hidden in its body was served next.
func TestFraming(t *testing.T) {
	g, pub, adm, cert := confusionGateway(t, route.PathOptions{})
	smuggled := "GET /admin/x HTTP/1.1\r\nHost: gw.test\r\n\r\n"
	cases := []struct {
		name    string
		request string
		code    int
	}{
		{"Content-Length and Transfer-Encoding", "POST /public HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 400},
		{"Transfer-Encoding and Content-Length", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 46\r\n\r\n0\r\n\r\n" + smuggled, 400},
		{"chunked not final", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + smuggled, 400},
		{"unknown coding before chunked", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + smuggled, 501},
		{"two Transfer-Encoding lines", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 501},
		{"identity", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: identity\r\n\r\n" + smuggled, 400},
		{"Transfer-Encoding in HTTP/1.0", "POST /public HTTP/1.0\r\nHost: gw.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, 400},
		{"differing Content-Length", "POST /public HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\nContent-Length: 46\r\n\r\n" + smuggled, 400},
		{"Content-Length list", "POST /public HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0, 46\r\n\r\n" + smuggled, 400},
		{"signed Content-Length", "POST /public HTTP/1.1\r\nHost: gw.test\r\nContent-Length: +0\r\n\r\n" + smuggled, 400},
		{"obsolete line folding", "GET /public HTTP/1.1\r\nHost: gw.test\r\nX-Folded: a\r\n b\r\n\r\n" + smuggled, 400},
		{"folded Transfer-Encoding", "POST /public HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\nTransfer-Encoding:\r\n chunked\r\n\r\n" + smuggled, 400},
		{"missing Host", "GET /public HTTP/1.1\r\n\r\n" + smuggled, 400},
		{"two Host headers", "GET /public HTTP/1.1\r\nHost: gw.test\r\nHost: other\r\n\r\n" + smuggled, 400},
		{"HTTP/2.0 on HTTP/1", "GET /public HTTP/2.0\r\nHost: gw.test\r\n\r\n" + smuggled, 505},
		{"headers too large", "GET /public HTTP/1.1\r\nHost: gw.test\r\nX-Big: " + strings.Repeat("a", DefaultMaxHeaderBytes+8192) + "\r\n\r\n" + smuggled, 431},
		{"chunk size with bare LF", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n" + smuggled, 400},
		{"chunk without CRLF", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n" + smuggled, 400},
		{"bad chunk size", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n" + smuggled, 400},
		{"trailer with bare LF", "POST /public HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\n" + smuggled, 400},
	}
	for _, tlsOn := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			addr, conf := g.Addr("http").String(), (*tls.Config)(nil)
			if tlsOn {
				name += "/tls"
				addr, conf = g.Addr("https").String(), tlsClientConfig(cert, "http/1.1")
			}
			t.Run(name, func(t *testing.T) {
				before := adm.n.Load()
				rc := dialRaw(t, addr, conf)
				rc.send(t, c.request)
				resp, body := rc.response(t)
				if resp.StatusCode != c.code {
					t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, c.code)
				}
				if !resp.Close {
					t.Errorf("answer without Connection: close")
				}
				if !rc.closed(t) {
					t.Errorf("connection still open after the refusal")
				}
				if n := adm.n.Load() - before; n != 0 {
					t.Errorf("the smuggled request reached the admin upstream %d times", n)
				}
			})
		}
	}
	_ = pub

	t.Run("pipelined requests before a refusal are answered", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "GET /public/1 HTTP/1.1\r\nHost: gw.test\r\n\r\n"+
			"POST /public/2 HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"+
			"GET /public/3 HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+smuggled)
		for i, want := range []string{"/public/1", "/public/2"} {
			resp, body := rc.response(t)
			if resp.StatusCode != 200 {
				t.Fatalf("request %d: status %d", i+1, resp.StatusCode)
			}
			if e := decodeEcho(t, body); e.URI != want {
				t.Fatalf("request %d reached %q", i+1, e.URI)
			}
		}
		resp, _ := rc.response(t)
		if resp.StatusCode != 400 || !rc.closed(t) {
			t.Fatalf("third request: %d, want 400 and a closed connection", resp.StatusCode)
		}
	})
	t.Run("identical Content-Length values are one", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("http").String(), nil)
		rc.send(t, "POST /public HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"+
			"GET /public/next HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		for _, want := range []string{"/public", "/public/next"} {
			resp, body := rc.response(t)
			if resp.StatusCode != 200 || decodeEcho(t, body).URI != want {
				t.Fatalf("status %d body %q, want 200 from %s", resp.StatusCode, body, want)
			}
		}
	})
	t.Run("plain HTTP on the TLS port", func(t *testing.T) {
		rc := dialRaw(t, g.Addr("https").String(), nil)
		rc.send(t, "GET /public HTTP/1.1\r\nHost: gw.test\r\n\r\n")
		resp, _ := rc.response(t)
		if resp.StatusCode != 400 || resp.Header.Get("Server") != "revgate" {
			t.Fatalf("status %d Server %q", resp.StatusCode, resp.Header.Get("Server"))
		}
	})
}

// echoRaw sends a raw request to the /public echo upstream of a fresh
// confusionGateway and returns the connection, the answer (200) and what
// the upstream saw.
func echoRaw(t *testing.T, request string) (*rawConn, *http.Response, echo) {
	t.Helper()
	g, _, _, _ := confusionGateway(t, route.PathOptions{})
	rc := dialRaw(t, g.Addr("http").String(), nil)
	rc.send(t, request)
	resp, body := rc.response(t)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d (%q)", resp.StatusCode, body)
	}
	return rc, resp, decodeEcho(t, body)
}

// TestUpgradeNotSwitched: a request that asks to upgrade passes the gate
// unvalidated after its head, so when the upstream does not switch
// protocols the answer closes the connection; an h2c upgrade is never
// forwarded (it would open a raw HTTP/2 tunnel to the upstream).
func TestUpgradeNotSwitched(t *testing.T) {
	rc, resp, e := echoRaw(t, "GET /public HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"+
		"GET /admin/x HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, h := range []string{"Upgrade", "Http2-Settings"} {
		if v := e.Header.Get(h); v != "" {
			t.Errorf("upstream received %s: %q", h, v)
		}
	}
	if !resp.Close || !rc.closed(t) {
		t.Fatal("connection kept open after an upgrade request that did not switch")
	}
}

// BenchmarkGate measures the framing gate's validation of a typical request
// head.
func BenchmarkGate(b *testing.B) {
	head := []byte("GET /svc0999/v1/items/42 HTTP/1.1\r\nHost: bench.local\r\nUser-Agent: wrk\r\nAccept: */*\r\nX-Request-Id: 0123456789abcdef\r\n\r\n")
	c := &gateConn{limit: DefaultMaxHeaderBytes + 4096}
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if n := c.scan(head); n != len(head) {
			b.Fatalf("scanned %d of %d", n, len(head))
		}
	}
}

// TestForwardedHeadersCannotBeSpoofed: a client's X_Forwarded_For (which a
// CGI-style upstream reads as X-Forwarded-For) never reaches the upstream,
// and an h2c upgrade offered among other protocols is not forwarded either.
func TestForwardedHeadersCannotBeSpoofed(t *testing.T) {
	_, _, e := echoRaw(t, "GET /public HTTP/1.1\r\nHost: gw.test\r\nX_Forwarded_For: 6.6.6.6\r\nx_forwarded_proto: https\r\nX-Forwarded_Host: evil\r\nX_Custom: kept\r\n"+
		"Connection: upgrade\r\nUpgrade: websocket, h2c\r\n\r\n")
	for k := range e.Header {
		if strings.Contains(strings.ToLower(k), "forwarded_") {
			t.Errorf("upstream received %s: %q", k, e.Header[k])
		}
	}
	if e.Header.Get("X-Forwarded-For") != "127.0.0.1" || e.Header.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("forwarded headers %v", e.Header)
	}
	if e.Header.Get("X_custom") != "kept" {
		t.Errorf("an unrelated underscore header was dropped: %v", e.Header)
	}
	if v := e.Header.Get("Upgrade"); v != "" {
		t.Errorf("upstream received Upgrade: %q", v)
	}
}

// TestConnectFailureTriesAnotherEndpoint: an endpoint that refuses
// connections (a pod stopped just after it left its EndpointSlice) costs a
// retry on another endpoint, not a 502, for bodiless and body-carrying
// requests alike; with every endpoint refusing, the answer is 502.
func TestConnectFailureTriesAnotherEndpoint(t *testing.T) {
	live := newCounted(t, "live")
	dead := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	sb := newSnapshot()
	sb.route("", "/mixed", model.PathPrefix, single("mixed", sb.backend("ns/mixed:80", dead(), addrOf(live.Server), dead())))
	sb.route("", "/dead", model.PathPrefix, single("dead", sb.backend("ns/dead:80", dead(), dead(), dead(), dead())))
	g, _ := runGateway(t, sb.s, Options{})
	for i := 0; i < 12; i++ {
		for _, method := range []string{"GET", "POST"} {
			var body io.Reader
			if method == "POST" {
				body = strings.NewReader("payload")
			}
			req, _ := http.NewRequest(method, url(g, "http", "/mixed"), body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || decodeEcho(t, string(b)).Name != "live" {
				t.Fatalf("%s %d: %d %q", method, i, resp.StatusCode, b)
			}
		}
	}
	if code, _, _ := get(t, nil, url(g, "http", "/dead"), "any", nil); code != http.StatusBadGateway {
		t.Fatalf("every endpoint refusing: %d, want 502", code)
	}
}
