package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/upstream"
)

// routeInfo is what the routing table carries for each route.
type routeInfo struct {
	cluster *upstream.Cluster
	// label names the route in metrics.
	label string
	// observer and ok200 are the route's metric children, made on first use
	// so that unused routes export nothing and used ones skip the label
	// lookup on every request.
	observer atomic.Pointer[prometheus.Observer]
	ok200    atomic.Pointer[prometheus.Counter]
}

// Handler proxies requests of one listener (plain or TLS).
type Handler struct {
	g *Gateway
	// secure is true on the TLS listener.
	secure bool
}

var _ http.Handler = (*Handler)(nil)

// copyBuffers are the 32 KiB buffers used to copy bodies.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// hopHeaders are removed in both directions (RFC 9110 section 7.6.1), in
// canonical form.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// ServeHTTP routes and proxies one request. The path that decides the
// route is the normalized one (route.NormalizePath), and it is also the path
// the upstream receives, so no upstream can resolve the forwarded path into
// another route's.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := h.g.opts.Clock.Now()
	if gc := gateOf(r); gc != nil {
		if ref := gc.refusalFor(r); ref != nil {
			// The stand-in for a request head the framing gate refused.
			w.Header()["Connection"] = connectionClose
			h.refuse(w, ref.code, "bad request: "+ref.reason)
			return
		}
		if gc.open.Load() {
			// The connection passed an upgrade request unvalidated: it ends
			// with this answer unless the protocol switches.
			w.Header()["Connection"] = connectionClose
		}
	}
	switch r.Method {
	case http.MethodConnect, http.MethodTrace:
		// A gateway is no tunnel, and TRACE echoes credentials back (as
		// nginx, revgate answers both with 405).
		h.refuse(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed")
		return
	}
	path, err := route.NormalizePath(r.URL.EscapedPath(), h.g.opts.Paths)
	if err != nil {
		h.refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	rt := h.g.runtime.Load()
	e := rt.table.Lookup(r.Host, path)
	if e == nil {
		h.refuse(w, http.StatusNotFound, "no route for this host and path")
		return
	}
	ri := e.Value.(*routeInfo)
	code := h.serve(w, r, path, ri, e.Route.RedirectHTTPS)
	h.g.observe(ri, code, start)
}

var (
	// serverHeader is the Server header of answers that carry none of their own.
	serverHeader    = []string{"revgate"}
	connectionClose = []string{"close"}
)

// refuse answers a request the gateway does not route with a plain-text
// error page and counts it.
func (h *Handler) refuse(w http.ResponseWriter, code int, msg string) {
	h.g.metrics.requests.WithLabelValues("", codeLabel(code)).Inc()
	h.error(w, code, msg)
}

// error writes the gateway's own error page.
func (h *Handler) error(w http.ResponseWriter, code int, msg string) {
	w.Header()["Server"] = serverHeader
	http.Error(w, msg, code)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, path string, ri *routeInfo, redirect bool) int {
	if redirect && !h.secure {
		return h.redirect(w, r, path)
	}
	pool := ri.cluster.Pick(r)
	if pool == nil {
		h.error(w, http.StatusServiceUnavailable, "route has no backend")
		return http.StatusServiceUnavailable
	}
	ep := pool.Pick()
	if ep == nil {
		h.g.metrics.upstreamErrors.WithLabelValues(pool.Backend.Key, errKindNoHealthy).Inc()
		h.error(w, http.StatusServiceUnavailable, "no healthy upstream")
		return http.StatusServiceUnavailable
	}
	return h.proxy(w, r, path, pool, ep)
}

// redirect answers 301 to the same normalized path and query on https.
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, path string) int {
	host := route.NormalizeHost(r.Host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := h.g.httpsPort; p != "" && p != "443" {
		host += ":" + p
	}
	target := "https://" + host + path
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header()["Server"] = serverHeader
	http.Redirect(w, r, target, http.StatusMovedPermanently)
	return http.StatusMovedPermanently
}

// proxy forwards r to ep with the normalized path and copies the answer
// back; it returns the status code sent to the client.
func (h *Handler) proxy(w http.ResponseWriter, r *http.Request, path string, pool *upstream.Pool, ep *upstream.Endpoint) int {
	rc := http.NewResponseController(w)
	if r.ProtoMajor == 1 {
		// Without full duplex net/http cuts off a request body still being
		// read when the upstream answers early.
		_ = rc.EnableFullDuplex()
	}
	upgrade := upgradeType(r.Header)
	if upgrade != "" && offersH2C(upgrade) {
		// An h2c upgrade would hand the client a raw HTTP/2 connection to
		// the upstream, on which it could ask for any path: never forwarded,
		// not even as one choice among others.
		upgrade = ""
		delete(r.Header, "Http2-Settings")
	}

	out := r.WithContext(r.Context())
	u := *r.URL
	u.Scheme, u.Host = pool.Scheme, ep.Addr
	// The upstream gets exactly the path that was matched: RawPath is used
	// as is when it encodes Path, and a canonical path always does.
	u.RawPath = path
	if p, err := neturl.PathUnescape(path); err == nil {
		u.Path = p
	}
	out.URL = &u
	out.RequestURI = ""
	out.Proto, out.ProtoMajor, out.ProtoMinor = "HTTP/1.1", 1, 1
	out.Close = false
	if r.ContentLength == 0 {
		out.Body = nil
	} else {
		out.Body = &unsentBody{ReadCloser: r.Body, rc: rc, timeout: h.g.opts.ClientBodyTimeout, readBy: slidingDeadline{perCall: true}}
	}
	// The inbound header map is owned by this handler and is not read after
	// it, so it is edited in place rather than copied.
	hdr := r.Header
	removeHopHeaders(hdr)
	removeForwardedAliases(hdr)
	if upgrade != "" {
		hdr["Connection"] = []string{"Upgrade"}
		hdr["Upgrade"] = []string{upgrade}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior, ok := hdr["X-Forwarded-For"]; ok && len(prior) > 0 {
			hdr["X-Forwarded-For"] = []string{strings.Join(prior, ", ") + ", " + ip}
		} else {
			hdr["X-Forwarded-For"] = []string{ip}
		}
	}
	if h.secure {
		hdr["X-Forwarded-Proto"] = protoHTTPS
	} else {
		hdr["X-Forwarded-Proto"] = protoHTTP
	}
	hdr["X-Forwarded-Host"] = []string{r.Host}
	if _, ok := hdr["User-Agent"]; !ok {
		// Present but empty: no Go default User-Agent is added upstream.
		hdr["User-Agent"] = nil
	}
	out.Header = hdr

	resp, ep, done, err := h.roundTrip(out, pool, ep)
	if err != nil {
		if b, ok := out.Body.(*unsentBody); ok && b.timedOut.Load() {
			// The client stopped sending its body (nginx's 408): its
			// fault, and the connection ends here.
			h.g.log.Debug("request body timed out", "backend", pool.Backend.Key, "timeout", h.g.opts.ClientBodyTimeout)
			w.Header()["Connection"] = connectionClose
			h.error(w, http.StatusRequestTimeout, "request body timed out")
			return http.StatusRequestTimeout
		}
		return h.upstreamError(w, r, pool, err)
	}
	defer done()
	defer resp.Body.Close()

	if resp.StatusCode == http.StatusSwitchingProtocols {
		return h.switchProtocols(w, r, rc, pool, resp, upgrade)
	}

	removeHopHeaders(resp.Header)
	dst := w.Header()
	for k, vv := range resp.Header {
		dst[k] = vv
	}
	if _, ok := dst["Server"]; !ok {
		dst["Server"] = serverHeader
	}
	w.WriteHeader(resp.StatusCode)
	if err := h.copyBody(w, r, rc, resp); err != nil {
		h.g.metrics.upstreamErrors.WithLabelValues(pool.Backend.Key, errKindBody).Inc()
		if r.Context().Err() == nil {
			h.g.log.Debug("response body copy failed", "backend", pool.Backend.Key, "endpoint", ep.Addr, "err", err)
		}
		// The status line is out: abort the connection so the client does
		// not take a truncated body for a whole one.
		panic(http.ErrAbortHandler)
	}
	for k, vv := range resp.Trailer {
		dst[http.TrailerPrefix+k] = vv
	}
	return resp.StatusCode
}

var (
	protoHTTP  = []string{"http"}
	protoHTTPS = []string{"https"}
)

// maxConnectAttempts bounds the endpoints a request is offered to when
// connections cannot be made.
const maxConnectAttempts = 3

// roundTrip sends out to ep. When no connection to ep can be made, nothing
// was sent, so the request goes to another healthy endpoint of the pool
// (up to maxConnectAttempts endpoints in all), as nginx's
// proxy_next_upstream does by default: an endpoint that went away between
// the last endpoints update and this request (a pod stopped just after it
// left its EndpointSlice) costs a retry, not a 502. It returns the answer,
// the endpoint that gave it and the function that ends that endpoint's
// count of requests in flight.
func (h *Handler) roundTrip(out *http.Request, pool *upstream.Pool, ep *upstream.Endpoint) (*http.Response, *upstream.Endpoint, func(), error) {
	var tried [maxConnectAttempts]*upstream.Endpoint
	for attempt := 0; ; attempt++ {
		out.URL.Host = ep.Addr
		done := ep.Begin()
		resp, err := pool.RoundTrip(out)
		if err == nil {
			return resp, ep, done, nil
		}
		done()
		tried[attempt] = ep
		if attempt+1 == maxConnectAttempts || !connectFailed(err) || out.Context().Err() != nil || !unsent(out) {
			return nil, ep, nil, err
		}
		next := pool.PickOther(tried[:attempt+1])
		if next == nil {
			return nil, ep, nil, err
		}
		h.g.metrics.upstreamErrors.WithLabelValues(pool.Backend.Key, errKindConnect).Inc()
		h.g.log.Debug("upstream connection failed, trying another endpoint", "backend", pool.Backend.Key, "endpoint", ep.Addr, "next", next.Addr, "err", err)
		ep = next
	}
}

// connectFailed reports whether err is a failure to connect (nothing sent).
func connectFailed(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// unsent reports whether the request's body (if any) is still unread, so
// that the request can be sent elsewhere.
func unsent(out *http.Request) bool {
	b, ok := out.Body.(*unsentBody)
	return out.Body == nil || ok && !b.read
}

// unsentBody is a request body that says whether it was read, and that the
// upstream transport cannot close (it closes a body on a failed round trip;
// net/http closes the real one after the handler). Each read moves the
// client body timeout's read deadline.
type unsentBody struct {
	io.ReadCloser
	read bool
	// rc reaches the request's connection or stream; timeout is the client
	// body timeout.
	rc      *http.ResponseController
	timeout time.Duration
	readBy  slidingDeadline // per call
	// timedOut is set when a read failed on the deadline; the upstream
	// transport reads the body on a goroutine of its own.
	timedOut atomic.Bool
}

func (b *unsentBody) Read(p []byte) (int, error) {
	b.read = true
	b.readBy.arm(b.rc, b.timeout)
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		if ne, ok := err.(net.Error); ok && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
			// The deadline stays: the connection ends with the 408, and
			// net/http's discarding of the rest of the body must not wait.
			b.timedOut.Store(true)
			return n, err
		}
	}
	b.readBy.disarm(b.rc)
	return n, err
}

func (b *unsentBody) Close() error { return nil }

// copyBody copies the upstream body with a pooled buffer, flushing each
// chunk of bodies of unknown length (streams, server-sent events). Writes
// are bounded by the send timeout, on the connection of an HTTP/1 request
// (net/http lifts its deadline after each answer) and on the stream of an
// HTTP/2 one.
func (h *Handler) copyBody(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, resp *http.Response) error {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	flush := resp.ContentLength < 0
	timeout := h.g.opts.SendTimeout
	sendBy := slidingDeadline{write: true, perCall: r.ProtoMajor >= 2}
	if !sendBy.perCall {
		// net/http writes the head and a short body when the handler
		// returns: the deadline covers them too.
		sendBy.arm(rc, timeout)
	}
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			sendBy.arm(rc, timeout)
			_, werr := w.Write(buf[:n])
			if werr == nil && flush {
				_ = rc.Flush()
			}
			sendBy.disarm(rc)
			if werr != nil {
				return werr
			}
		}
		if rerr == io.EOF {
			if !sendBy.perCall {
				// And for what net/http writes last (the end of a chunked
				// body), however long the upstream took to end it.
				sendBy.arm(rc, timeout)
			}
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// upstreamError answers 504 for timeouts and 502 for other failures; it
// answers nothing when the client went away.
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, pool *upstream.Pool, err error) int {
	if r.Context().Err() != nil {
		// Client closed the request: nginx's 499, for metrics only.
		return 499
	}
	if gc := gateOf(r); gc != nil && gc.broken.Load() {
		// The request's own chunked body was malformed (the framing gate
		// ended it): the client's fault, and the connection ends here.
		w.Header()["Connection"] = connectionClose
		h.error(w, http.StatusBadRequest, "bad request: malformed chunked request body")
		return http.StatusBadRequest
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		h.g.metrics.upstreamErrors.WithLabelValues(pool.Backend.Key, errKindTimeout).Inc()
		h.error(w, http.StatusGatewayTimeout, "upstream timed out")
		return http.StatusGatewayTimeout
	}
	h.g.metrics.upstreamErrors.WithLabelValues(pool.Backend.Key, errKindConnect).Inc()
	h.g.log.Debug("upstream request failed", "backend", pool.Backend.Key, "err", err)
	h.error(w, http.StatusBadGateway, "bad gateway")
	return http.StatusBadGateway
}

// switchProtocols completes an upgrade (WebSocket): it hijacks the client
// connection, relays the 101 answer and splices both directions.
func (h *Handler) switchProtocols(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, pool *upstream.Pool, resp *http.Response, reqUpgrade string) int {
	back, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || reqUpgrade == "" || !strings.EqualFold(upgradeType(resp.Header), reqUpgrade) {
		h.g.metrics.upstreamErrors.WithLabelValues(pool.Backend.Key, errKindConnect).Inc()
		h.error(w, http.StatusBadGateway, "upstream switched to an unrequested protocol")
		return http.StatusBadGateway
	}
	defer back.Close()
	conn, brw, err := rc.Hijack()
	if err != nil {
		h.error(w, http.StatusInternalServerError, "upgrade not supported on this connection")
		return http.StatusInternalServerError
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	h.g.trackHijacked(conn, true)
	defer h.g.trackHijacked(conn, false)

	// Keep Connection/Upgrade on the 101; drop the other hop-by-hop headers.
	up := resp.Header.Get("Upgrade")
	removeHopHeaders(resp.Header)
	resp.Header.Set("Connection", "Upgrade")
	resp.Header.Set("Upgrade", up)
	fmt.Fprintf(brw, "HTTP/1.1 101 %s\r\n", http.StatusText(http.StatusSwitchingProtocols))
	if err := resp.Header.Write(brw); err != nil {
		return http.StatusSwitchingProtocols
	}
	brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		return http.StatusSwitchingProtocols
	}
	errc := make(chan error, 2)
	go func() { errc <- splice(back, brw.Reader) }()
	go func() { errc <- splice(conn, back) }()
	<-errc
	return http.StatusSwitchingProtocols
}

// splice copies src to dst with a pooled buffer, then half-closes dst's
// write side where it can.
func splice(dst io.Writer, src io.Reader) error {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	_, err := io.CopyBuffer(dst, src, *bp)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	return err
}

// upgradeType returns the Upgrade protocol when Connection names upgrade.
func upgradeType(h http.Header) string {
	conn, ok := h["Connection"]
	if !ok {
		return ""
	}
	for _, v := range conn {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(textproto.TrimString(tok), "upgrade") {
				return h.Get("Upgrade")
			}
		}
	}
	return ""
}

// offersH2C reports whether an Upgrade list names h2c.
func offersH2C(upgrade string) bool {
	for _, tok := range strings.Split(upgrade, ",") {
		name, _, _ := strings.Cut(textproto.TrimString(tok), "/")
		if strings.EqualFold(name, "h2c") {
			return true
		}
	}
	return false
}

// forwardedHeaders are the headers the gateway sets for the upstream.
var forwardedHeaders = map[string]bool{"X-Forwarded-For": true, "X-Forwarded-Proto": true, "X-Forwarded-Host": true}

// removeForwardedAliases deletes request headers that spell one of the
// forwarded headers with underscores (X_Forwarded_For): CGI-style upstreams
// (PHP-FPM, WSGI and Rack servers) read both spellings as the same variable,
// so a client could override what the gateway sets.
func removeForwardedAliases(h http.Header) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		if forwardedHeaders[textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-"))] {
			delete(h, k)
		}
	}
}

// removeHopHeaders deletes the hop-by-hop headers and those named by
// Connection.
func removeHopHeaders(h http.Header) {
	if conn, ok := h["Connection"]; ok {
		for _, v := range conn {
			for _, tok := range strings.Split(v, ",") {
				if tok = textproto.TrimString(tok); tok != "" {
					delete(h, textproto.CanonicalMIMEHeaderKey(tok))
				}
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// observe records a finished request in the metrics.
func (g *Gateway) observe(ri *routeInfo, code int, start time.Time) {
	o := ri.observer.Load()
	if o == nil {
		obs := g.metrics.duration.WithLabelValues(ri.label)
		ri.observer.Store(&obs)
		o = &obs
	}
	(*o).Observe(g.opts.Clock.Since(start).Seconds())
	if code == http.StatusOK {
		c := ri.ok200.Load()
		if c == nil {
			cnt := g.metrics.requests.WithLabelValues(ri.label, codeText[http.StatusOK])
			ri.ok200.Store(&cnt)
			c = &cnt
		}
		(*c).Inc()
		return
	}
	g.metrics.requests.WithLabelValues(ri.label, codeLabel(code)).Inc()
}
