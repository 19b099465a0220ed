package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// h1Client runs bodiless idempotent HTTP/1.1 requests on the calling
// goroutine over kept-alive connections. http.Transport hands every request
// to a writer and a reader goroutine per connection; on a proxy's hot path
// those hand-offs cost more CPU than the request itself. Parsing stays with
// net/http (Request.Write, http.ReadResponse), so there is one HTTP parser.
type h1Client struct {
	dialer                *net.Dialer
	responseHeaderTimeout time.Duration
	idleTimeout           time.Duration
	maxIdle               int
	maxHeaderBytes        int64

	mu   sync.Mutex
	idle map[string][]*h1Conn
}

type h1Conn struct {
	c         net.Conn
	lr        *limitedReader // under br: bounds response headers
	br        *bufio.Reader
	bw        *bufio.Writer
	addr      string
	idleSince time.Time
}

// aLongTimeAgo is a deadline in the past, to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

func newH1Client(o TransportOptions) *h1Client {
	o = o.withDefaults()
	return &h1Client{
		dialer:                &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second},
		responseHeaderTimeout: o.ResponseHeaderTimeout,
		idleTimeout:           o.IdleConnTimeout,
		maxIdle:               o.MaxIdleConnsPerHost,
		maxHeaderBytes:        o.MaxResponseHeaderBytes,
		idle:                  map[string][]*h1Conn{},
	}
}

// eligible reports whether the fast path may carry req: plain HTTP, no
// body, an idempotent method (so a request that meets a connection closed by
// the upstream can be retried), no protocol upgrade.
func eligible(req *http.Request) bool {
	if req.URL.Scheme != "http" || (req.Body != nil && req.Body != http.NoBody) {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	_, upgrade := req.Header["Upgrade"]
	return !upgrade
}

func (c *h1Client) get(addr string) *h1Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		list := c.idle[addr]
		if len(list) == 0 {
			return nil
		}
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		c.idle[addr] = list[:len(list)-1]
		// The age of a connection is on the wall clock, like the socket
		// deadlines: it races the upstream's own keep-alive timer.
		if time.Since(pc.idleSince) < c.idleTimeout {
			return pc
		}
		pc.c.Close()
	}
}

func (c *h1Client) put(pc *h1Conn) {
	pc.idleSince = time.Now()
	c.mu.Lock()
	if len(c.idle[pc.addr]) < c.maxIdle {
		c.idle[pc.addr] = append(c.idle[pc.addr], pc)
		pc = nil
	}
	c.mu.Unlock()
	if pc != nil {
		pc.c.Close()
	}
}

func (c *h1Client) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, list := range c.idle {
		for _, pc := range list {
			pc.c.Close()
		}
		delete(c.idle, addr)
	}
}

func (c *h1Client) dial(ctx context.Context, addr string) (*h1Conn, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	lr := &limitedReader{r: conn, n: noLimit}
	return &h1Conn{c: conn, lr: lr, br: bufio.NewReaderSize(lr, 16<<10), bw: bufio.NewWriterSize(conn, 8<<10), addr: addr}, nil
}

// noLimit lifts a limitedReader's bound.
const noLimit = 1<<63 - 1

// limitedReader fails reads once n bytes were read (as net/http's
// Transport bounds response headers): a hostile upstream cannot make the
// gateway buffer an endless header block.
type limitedReader struct {
	r io.Reader
	n int64
}

// errHeaderTooLarge fails a response whose header block exceeds the bound.
var errHeaderTooLarge = errors.New("upstream response header block too large")

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// max1xx bounds the interim answers before the final one, as net/http's
// Transport does.
const max1xx = 5

// roundTrip sends req to req.URL.Host. A kept-alive connection that turns
// out closed before any answer is replaced by a new one once.
func (c *h1Client) roundTrip(req *http.Request) (*http.Response, error) {
	addr := req.URL.Host
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		pc := c.get(addr)
		reused := pc != nil
		if !reused {
			var err error
			if pc, err = c.dial(ctx, addr); err != nil {
				return nil, err
			}
		}
		resp, err := c.exchange(ctx, pc, req)
		if err == nil {
			return resp, nil
		}
		pc.c.Close()
		if !reused || attempt > 0 || ctx.Err() != nil || !staleConnError(err) {
			return nil, err
		}
	}
}

// staleConnError is what a kept-alive connection closed by the upstream
// yields before any byte of an answer.
func staleConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (c *h1Client) exchange(ctx context.Context, pc *h1Conn, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { pc.c.SetDeadline(aLongTimeAgo) })
	if err := req.Write(pc.bw); err != nil {
		stop()
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		stop()
		return nil, err
	}
	if c.responseHeaderTimeout > 0 {
		pc.c.SetReadDeadline(time.Now().Add(c.responseHeaderTimeout))
	}
	var resp *http.Response
	for n1xx := 0; ; n1xx++ {
		if n1xx > max1xx {
			stop()
			return nil, errors.New("upstream sent too many 1xx answers")
		}
		// What is buffered already was read under the previous bound.
		pc.lr.n = c.maxHeaderBytes
		var err error
		resp, err = http.ReadResponse(pc.br, req)
		pc.lr.n = noLimit
		if err != nil {
			stop()
			return nil, err
		}
		// Interim answers (103 Early Hints) are dropped; the final one follows.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	// Lift the header deadline for the body, unless the body is already
	// buffered whole: then no read is left, and the next exchange sets its
	// own deadline (this saves a timer update per small response).
	if c.responseHeaderTimeout > 0 && (resp.ContentLength < 0 || int64(pc.br.Buffered()) < resp.ContentLength) {
		pc.c.SetReadDeadline(time.Time{})
	}
	resp.Body = &h1Body{rc: resp.Body, pc: pc, client: c, reusable: !resp.Close, stop: stop}
	return resp, nil
}

// h1Body gives the connection back when the body was read to its end and
// the connection may be reused, and closes it otherwise.
type h1Body struct {
	rc       io.ReadCloser
	pc       *h1Conn
	client   *h1Client
	reusable bool
	eof      bool
	closed   bool
	stop     func() bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *h1Body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	// stop is false when the request's context fired and poisoned the
	// connection's deadline.
	notFired := b.stop()
	if b.eof && b.reusable && notFired && b.pc.br.Buffered() == 0 {
		b.client.put(b.pc)
		return nil
	}
	return b.pc.c.Close()
}
