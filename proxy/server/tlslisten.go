package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// tlsListener completes TLS handshakes itself, before net/http sees the
// connection, so that HTTP/1.x over TLS passes the framing gate as plain
// HTTP does: net/http keeps its own *tls.Conn only for HTTP/2 (chosen by
// ALPN), which frames requests itself. The handshakes run on their own
// goroutines, bounded by a timeout, so a slow client never holds up Accept.
type tlsListener struct {
	net.Listener
	config  *tls.Config
	timeout time.Duration
	limit   int
	log     *slog.Logger

	conns     chan net.Conn
	errs      chan error
	done      chan struct{}
	closeOnce sync.Once
}

func newTLSListener(l net.Listener, config *tls.Config, handshakeTimeout time.Duration, headLimit int, log *slog.Logger) *tlsListener {
	tl := &tlsListener{
		Listener: l, config: config, timeout: handshakeTimeout, limit: headLimit, log: log,
		conns: make(chan net.Conn), errs: make(chan error), done: make(chan struct{}),
	}
	go tl.acceptLoop()
	return tl
}

// acceptLoop accepts raw connections and hands each to a handshake; accept
// errors go to Accept's caller (net/http retries temporary ones).
func (l *tlsListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go l.handshake(c)
	}
}

// plainOnTLS answers a client that speaks plain HTTP to the TLS port.
const plainOnTLS = "HTTP/1.0 400 Bad Request\r\nServer: revgate\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"

func (l *tlsListener) handshake(raw net.Conn) {
	tc := tls.Server(raw, l.config)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader[:]) {
			_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(re.Conn, plainOnTLS)
		}
		l.log.Debug("TLS handshake failed", "remote", raw.RemoteAddr().String(), "err", err)
		raw.Close()
		return
	}
	var c net.Conn = tc
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		c = newGateConn(tc, l.limit)
	}
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// looksLikeHTTP reports whether a TLS record header is the start of a plain
// HTTP request.
func looksLikeHTTP(hdr []byte) bool {
	switch string(hdr) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH", "CONNE", "TRACE":
		return true
	}
	return false
}

// Accept returns the next connection whose handshake completed.
func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; handshakes under way are dropped.
func (l *tlsListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}
