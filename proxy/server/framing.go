package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/revgate/revgate/internal/httpsyntax"
)

// The framing gate.
//
// net/http parses requests leniently where request smuggling lives: it
// serves a request carrying both Content-Length and Transfer-Encoding (the
// latter wins) and keeps the connection, it joins obsolete line folding, and
// it ignores Transfer-Encoding in HTTP/1.0 requests. A front proxy that
// frames such a request otherwise than revgate does can then slip a second
// request past its own rules. RFC 9112 section 6.3 requires at least closing
// the connection; revgate refuses the request with 400 and closes, as nginx
// does.
//
// net/http offers no hook before it frames a request, so every HTTP/1.x
// connection (plain, and TLS when ALPN did not choose h2) is wrapped in a
// gateConn that validates each request head before net/http reads any byte
// of it, and follows Content-Length and chunked bodies to find the next
// head. The gate never rewrites what net/http parses: it only withholds. A
// refused head is replaced by a fixed synthetic request that the handler
// answers with the refusal (4xx/5xx, a reason, Connection: close), so
// answers to earlier pipelined requests are not disturbed. Where a chunked
// body is malformed, the gate hands net/http a few bytes that its chunked
// reader certainly rejects at the same place and nothing after them, so
// net/http can never read the rest of the stream as new requests. For chunk
// framing the gate is at least as strict as net/http's reader
// (net/http/internal/chunked.go): whatever it accepts, net/http reads with
// the same boundaries.

// refusal is why a request head was refused.
type refusal struct {
	code   int
	reason string
}

var (
	refuseCLAndTE     = &refusal{http.StatusBadRequest, "both Content-Length and Transfer-Encoding"}
	refuseTE10        = &refusal{http.StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request"}
	refuseTENotFinal  = &refusal{http.StatusBadRequest, "chunked is not the final transfer coding"}
	refuseTEUnknown   = &refusal{http.StatusNotImplemented, "unsupported transfer coding"}
	refuseCLBad       = &refusal{http.StatusBadRequest, "invalid Content-Length"}
	refuseCLDiffer    = &refusal{http.StatusBadRequest, "differing Content-Length values"}
	refuseObsFold     = &refusal{http.StatusBadRequest, "obsolete line folding"}
	refuseBadLine     = &refusal{http.StatusBadRequest, "malformed header line"}
	refuseRequestLine = &refusal{http.StatusBadRequest, "malformed request line"}
	refuseVersion     = &refusal{http.StatusHTTPVersionNotSupported, "HTTP version not supported"}
	refuseNoHost      = &refusal{http.StatusBadRequest, "missing Host header"}
	refuseHosts       = &refusal{http.StatusBadRequest, "more than one Host header"}
	refuseTooLarge    = &refusal{http.StatusRequestHeaderFieldsTooLarge, "request header fields too large"}
)

// The synthetic request that stands for a refused head: the handler
// recognises it by this target and Host on a connection whose gate refused a
// head and handed it out.
const (
	refusedTarget = "/"
	refusedHost   = "refused.revgate.invalid"
)

var refusedHead = []byte("GET " + refusedTarget + " HTTP/1.1\r\nHost: " + refusedHost + "\r\n\r\n")

// Bytes that net/http's chunked reader rejects at each place of a chunked
// body: an invalid chunk-size line, a chunk not followed by CRLF, a
// malformed trailer section. Each is complete, so that net/http fails on it
// without asking for more (a read error would cancel the request instead).
var (
	badChunkLine = []byte("x\r\n")
	badChunkEnd  = []byte("xx")
	badTrailer   = []byte("x\r\n\r\n")
)

// Limits that mirror net/http's chunked reader.
const (
	maxChunkLine   = 4096     // bufio buffer a chunk-size line must fit in, LF included
	maxTrailer     = 4096     // bufio buffer the trailer section must fit in
	maxChunkExcess = 16 << 10 // non-data bytes tolerated beyond 16 + 2×size per chunk
)

type gateState uint8

const (
	gateHead       gateState = iota
	gateBody                 // a Content-Length body: remain bytes
	gateChunkSize            // a chunk-size line
	gateChunkData            // remain bytes of chunk data
	gateChunkEnd             // the CRLF after chunk data
	gateTrailer              // the trailer section after the last chunk
	gateOpen                 // after a protocol upgrade head: no more HTTP
	gateRefused              // a head was refused: nothing more for net/http
	gateBodyBroken           // a chunked body was malformed: nothing more
)

// gateConn is an HTTP/1.x connection whose requests pass the framing gate.
type gateConn struct {
	net.Conn
	// limit is the largest request head (request line and header fields).
	limit int

	// The reading side below is used by one goroutine at a time (net/http
	// serialises reads of a connection).
	st     gateState
	remain uint64 // body or chunk bytes left
	excess int64  // chunk overhead, as net/http counts it
	buf    []byte // owned buffer behind pend and ready
	pend   []byte // read but not yet validated
	ready  []byte // validated or synthetic, not yet handed to net/http
	rerr   error  // read error to report once ready is drained
	synth  bool   // the refusal's synthetic head was handed out
	// passed counts the bytes validated so far; heads, when not nil,
	// records the offset of each validated head among them (for tests).
	passed int
	heads  *[]int

	// Shared with the handler goroutines.
	refused atomic.Pointer[refusal]
	handed  atomic.Bool // the synthetic head went to net/http
	open    atomic.Bool // an upgrade head passed: the handler must switch or close
	broken  atomic.Bool // a chunked body was malformed
}

func newGateConn(c net.Conn, limit int) *gateConn { return &gateConn{Conn: c, limit: limit} }

// Read hands net/http validated bytes only.
func (c *gateConn) Read(p []byte) (int, error) {
	for {
		if len(c.ready) > 0 {
			n := copy(p, c.ready)
			c.ready = c.ready[n:]
			return n, nil
		}
		switch c.st {
		case gateOpen:
			if len(c.pend) > 0 {
				n := copy(p, c.pend)
				c.pend = c.pend[n:]
				return n, nil
			}
			return c.Conn.Read(p)
		case gateRefused:
			if !c.synth {
				c.synth = true
				c.handed.Store(true)
				c.ready = refusedHead
				continue
			}
			// Nothing more goes to net/http. Reading on (and dropping what
			// comes) keeps deadlines and a client's close working for the
			// answer still being written.
			if _, err := c.Conn.Read(p); err != nil {
				return 0, err
			}
			continue
		case gateBodyBroken:
			return 0, errGateClosed
		}
		if c.rerr != nil {
			err := c.rerr
			c.rerr = nil
			return 0, err
		}
		if len(c.pend) == 0 {
			// The common case: read straight into net/http's buffer, hand
			// over what validates and keep the rest (an incomplete head).
			n, err := c.Conn.Read(p)
			if n > 0 {
				v := c.scan(p[:n])
				if v < n {
					c.keep(p[v:n])
				}
				if v > 0 {
					c.rerr = err
					return v, nil
				}
			}
			if err != nil {
				return 0, err
			}
			continue
		}
		if err := c.readMore(); err != nil && len(c.ready) == 0 {
			return 0, err
		}
	}
}

// errGateClosed ends a connection whose chunked body was malformed. It is a
// read error of the kind net/http closes on quietly.
var errGateClosed = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection closed after a malformed request body")}

// keep stores bytes not yet validated.
func (c *gateConn) keep(b []byte) {
	if c.buf == nil {
		c.buf = make([]byte, 0, 4096)
	}
	c.pend = append(c.buf[:0], b...)
	c.buf = c.pend[:0]
}

// readMore reads after the pending bytes and validates them again.
func (c *gateConn) readMore() error {
	if len(c.pend) > 0 && &c.pend[0] != &c.buf[:1][0] {
		// Move the pending bytes to the front (ready is empty here).
		c.pend = append(c.buf[:0], c.pend...)
	}
	if cap(c.pend)-len(c.pend) < 1024 {
		grown := make([]byte, len(c.pend), 2*cap(c.pend)+4096)
		copy(grown, c.pend)
		c.pend, c.buf = grown, grown[:0]
	}
	n, err := c.Conn.Read(c.pend[len(c.pend):cap(c.pend)])
	c.pend = c.pend[:len(c.pend)+n]
	if v := c.scan(c.pend); v > 0 {
		c.ready, c.pend = c.pend[:v], c.pend[v:]
	}
	if err != nil && len(c.ready) > 0 {
		c.rerr = err
	}
	return err
}

// scan validates b from the current state on and returns how many of its
// bytes may go to net/http; it stops at an incomplete element.
func (c *gateConn) scan(b []byte) int {
	n := c.scanFrom(b)
	c.passed += n
	return n
}

func (c *gateConn) scanFrom(b []byte) int {
	i := 0
	for i < len(b) {
		switch c.st {
		case gateHead:
			n, h, ref := parseHead(b[i:], c.limit)
			if n > 0 && c.heads != nil {
				*c.heads = append(*c.heads, c.passed+i)
			}
			if ref != nil {
				c.st = gateRefused
				c.refused.Store(ref)
				return i
			}
			if n == 0 {
				return i
			}
			i += n
			switch {
			case h.upgrade:
				// What follows may be another protocol: the handler switches
				// or closes the connection after its answer.
				c.st = gateOpen
				c.open.Store(true)
				return len(b)
			case h.chunked:
				c.st, c.excess = gateChunkSize, 0
			case h.length > 0:
				c.st, c.remain = gateBody, uint64(h.length)
			}
		case gateBody, gateChunkData:
			k := uint64(len(b) - i)
			if k > c.remain {
				k = c.remain
			}
			i += int(k)
			c.remain -= k
			if c.remain == 0 {
				if c.st == gateBody {
					c.st = gateHead
				} else {
					c.st = gateChunkEnd
				}
			}
		case gateChunkSize:
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				if len(b)-i >= maxChunkLine {
					return c.breakBody(i, badChunkLine)
				}
				return i
			}
			size, ok := c.chunkSize(b[i : i+j+1])
			if !ok {
				return c.breakBody(i, badChunkLine)
			}
			i += j + 1
			if size == 0 {
				c.st = gateTrailer
			} else {
				c.st, c.remain = gateChunkData, size
			}
		case gateChunkEnd:
			if len(b)-i < 2 {
				if b[i] != '\r' {
					return c.breakBody(i, badChunkEnd)
				}
				return i
			}
			if b[i] != '\r' || b[i+1] != '\n' {
				return c.breakBody(i, badChunkEnd)
			}
			i += 2
			c.st = gateChunkSize
		case gateTrailer:
			n, ok := parseTrailer(b[i:])
			if !ok {
				return c.breakBody(i, badTrailer)
			}
			if n == 0 {
				return i
			}
			i += n
			c.st = gateHead
		case gateOpen:
			return len(b)
		default:
			return i
		}
	}
	return i
}

// breakBody ends a malformed chunked body at offset i: net/http gets the
// bytes before it, then bad, then nothing.
func (c *gateConn) breakBody(i int, bad []byte) int {
	c.st = gateBodyBroken
	c.broken.Store(true)
	c.ready = bad
	return i
}

// chunkSize validates a chunk-size line (LF included) as net/http's chunked
// reader does, or more strictly, and returns the size.
func (c *gateConn) chunkSize(line []byte) (uint64, bool) {
	if len(line) > maxChunkLine || len(line) < 2 || line[len(line)-2] != '\r' ||
		bytes.IndexByte(line[:len(line)-2], '\r') >= 0 {
		return 0, false
	}
	p := line[:len(line)-2]
	c.excess += int64(len(p)) + 2
	if i := bytes.IndexByte(p, ';'); i >= 0 {
		p = p[:i]
	}
	if len(p) == 0 || len(p) > 15 {
		return 0, false
	}
	var n uint64
	for _, b := range p {
		d, ok := httpsyntax.Unhex(b)
		if !ok {
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	c.excess -= 16 + 2*int64(n)
	c.excess = max(c.excess, 0)
	if c.excess > maxChunkExcess {
		return 0, false
	}
	return n, true
}

// parseTrailer validates the trailer section after the last chunk and
// returns its length with the final CRLF, 0 while incomplete. Lines must end
// in CRLF and be well-formed fields, all within net/http's 4 KiB window, so
// that net/http ends the section at the same empty line.
func parseTrailer(b []byte) (int, bool) {
	pos := 0
	for {
		j := bytes.IndexByte(b[pos:], '\n')
		if j < 0 {
			return 0, len(b) < maxTrailer
		}
		end := pos + j + 1
		if end > maxTrailer || j == 0 || b[end-2] != '\r' {
			return 0, false
		}
		line := b[pos : end-2]
		if len(line) == 0 {
			return end, true
		}
		if !validField(line) {
			return 0, false
		}
		pos = end
	}
}

// validField reports whether a header line is "name: value" with a token
// name and valid value bytes, without folding.
func validField(line []byte) bool {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return false
	}
	for _, b := range line[:colon] {
		if !httpsyntax.Token[b] {
			return false
		}
	}
	for _, b := range line[colon+1:] {
		if b < 0x20 && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// head is what the gate needs to know of a request head.
type head struct {
	// length is the Content-Length (0 when absent).
	length  int64
	chunked bool
	// upgrade is a protocol upgrade request (Connection: upgrade and an
	// Upgrade header).
	upgrade bool
}

// parseHead validates a request head at the start of b. It returns the
// head's length (0 while incomplete) or why it is refused. Lines end at LF
// with an optional CR, as net/http reads them.
func parseHead(b []byte, limit int) (int, head, *refusal) {
	var (
		h                      head
		http10, connUpgrade    bool
		hasUpgrade             bool
		hosts, teLines         int
		teChunked, teLastChunk bool
		cl                     []byte
		clSeen                 bool
	)
	pos := 0
	for line := 0; ; line++ {
		j := bytes.IndexByte(b[pos:], '\n')
		if j < 0 {
			if len(b) > limit {
				return 0, h, refuseTooLarge
			}
			return 0, h, nil
		}
		end := pos + j + 1
		if end > limit {
			return 0, h, refuseTooLarge
		}
		l := b[pos : end-1]
		if len(l) > 0 && l[len(l)-1] == '\r' {
			l = l[:len(l)-1]
		}
		pos = end
		if line == 0 {
			var ref *refusal
			if http10, ref = requestLineVersion(l); ref != nil {
				return 0, h, ref
			}
			continue
		}
		if len(l) == 0 {
			break
		}
		if l[0] == ' ' || l[0] == '\t' {
			return 0, h, refuseObsFold
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 {
			return 0, h, refuseBadLine
		}
		name, value := l[:colon], trimOWS(l[colon+1:])
		switch len(name) {
		case 4:
			if asciiEqualFold(name, "host") {
				hosts++
			}
		case 7:
			if asciiEqualFold(name, "upgrade") && len(value) > 0 {
				hasUpgrade = true
			}
		case 10:
			if asciiEqualFold(name, "connection") && hasToken(value, "upgrade") {
				connUpgrade = true
			}
		case 14:
			if asciiEqualFold(name, "content-length") {
				if !allDigits(value) {
					return 0, h, refuseCLBad
				}
				if clSeen && !bytes.Equal(cl, value) {
					return 0, h, refuseCLDiffer
				}
				cl, clSeen = value, true
			}
		case 17:
			if asciiEqualFold(name, "transfer-encoding") {
				teLines++
				teChunked = asciiEqualFold(value, "chunked")
				teLastChunk = lastTokenIs(value, "chunked")
			}
		}
	}
	switch {
	case teLines > 0 && clSeen:
		return 0, h, refuseCLAndTE
	case teLines > 0 && http10:
		return 0, h, refuseTE10
	case teLines > 1 || teLines == 1 && !teChunked:
		if teLastChunk {
			return 0, h, refuseTEUnknown
		}
		return 0, h, refuseTENotFinal
	case hosts > 1:
		return 0, h, refuseHosts
	case hosts == 0 && !http10 && !bytes.HasPrefix(b, []byte("CONNECT ")):
		return 0, h, refuseNoHost
	}
	h.chunked = teLines == 1
	for _, d := range cl {
		h.length = h.length*10 + int64(d-'0')
	}
	h.upgrade = hasUpgrade && connUpgrade
	return pos, h, nil
}

// requestLineVersion checks "METHOD SP target SP HTTP/1.x" (split as
// net/http splits it) and reports whether the version is 1.0.
func requestLineVersion(l []byte) (http10 bool, ref *refusal) {
	sp1 := bytes.IndexByte(l, ' ')
	if sp1 <= 0 {
		return false, refuseRequestLine
	}
	rest := l[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return false, refuseRequestLine
	}
	switch v := rest[sp2+1:]; {
	case string(v) == "HTTP/1.1":
		return false, nil
	case string(v) == "HTTP/1.0":
		return true, nil
	case len(v) == 8 && string(v[:5]) == "HTTP/" && isDigit(v[5]) && v[6] == '.' && isDigit(v[7]):
		return false, refuseVersion
	}
	return false, refuseRequestLine
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func allDigits(b []byte) bool {
	if len(b) == 0 || len(b) > 18 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// hasToken reports whether a comma-separated list holds tok (any case).
func hasToken(list []byte, tok string) bool {
	for len(list) > 0 {
		var item []byte
		if i := bytes.IndexByte(list, ','); i >= 0 {
			item, list = list[:i], list[i+1:]
		} else {
			item, list = list, nil
		}
		if asciiEqualFold(trimOWS(item), tok) {
			return true
		}
	}
	return false
}

// lastTokenIs reports whether the last non-empty element of a
// comma-separated list is tok (any case).
func lastTokenIs(list []byte, tok string) bool {
	for len(list) > 0 {
		i := bytes.LastIndexByte(list, ',')
		item := trimOWS(list[i+1:])
		if len(item) > 0 {
			return asciiEqualFold(item, tok)
		}
		if i < 0 {
			return false
		}
		list = list[:i]
	}
	return false
}

// Close closes the connection; after a refusal it first lets the answer
// reach the client: half-close, then read what the client still sends for a
// moment, so that closing with unread data does not reset the connection
// and destroy the answer in flight (RFC 9112 section 9.6).
func (c *gateConn) Close() error {
	if c.refused.Load() != nil || c.broken.Load() {
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
			var scratch [1024]byte
			for {
				if _, err := c.Conn.Read(scratch[:]); err != nil {
					break
				}
			}
		}
	}
	return c.Conn.Close()
}

// lingerTimeout bounds reading after a refusal's answer.
const lingerTimeout = time.Second

// CloseWrite half-closes the connection (for upgraded connections).
func (c *gateConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// gateKey is the context key of a request's gateConn.
type gateKey struct{}

// connContext attaches the gate of a connection to its requests' contexts.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*gateConn); ok {
		return context.WithValue(ctx, gateKey{}, gc)
	}
	return ctx
}

// gateOf returns the gate of a request's connection, nil for HTTP/2.
func gateOf(r *http.Request) *gateConn {
	gc, _ := r.Context().Value(gateKey{}).(*gateConn)
	return gc
}

// refusalFor returns the refusal a request stands for: it is the synthetic
// request of a gate that refused a head.
func (c *gateConn) refusalFor(r *http.Request) *refusal {
	ref := c.refused.Load()
	if ref == nil || !c.handed.Load() || r.Host != refusedHost || r.RequestURI != refusedTarget {
		return nil
	}
	return ref
}

// gateListener wraps accepted connections in the framing gate.
type gateListener struct {
	net.Listener
	limit int
}

func (l *gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newGateConn(c, l.limit), nil
}
