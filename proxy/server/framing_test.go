package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
)

// chunkConn hands out data in pieces of a fixed size, then EOF.
type chunkConn struct {
	net.Conn
	data  []byte
	piece int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.piece, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzGateFraming checks the framing gate against net/http's own request
// parser on the bytes the gate lets through: net/http must find each request
// exactly where the gate saw its head, read each body to the gate's end of
// it, and fail on a body only where the gate ended the connection for it.
// A disagreement would let net/http read bytes the gate took for body data
// as a request the gate never validated.
func FuzzGateFraming(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET /q HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\nGET /q HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\n\nGET /q HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.0\nHost: a\n\nGET / HTTP/1.1\nHost: a\nX: y\n z\n\n",
		"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nGET /x HTTP/1.1\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
	} {
		f.Add([]byte(s), uint8(7))
		f.Add([]byte(s), uint8(255))
	}
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		var heads []int
		gc := newGateConn(&chunkConn{data: data, piece: int(piece%64) + 1}, 1024)
		gc.heads = &heads
		var out []byte
		buf := make([]byte, 100)
		for len(out) < 1<<20 {
			n, err := gc.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		// What net/http reads of the gate's output.
		cr := &countingReader{r: bytes.NewReader(out)}
		br := bufio.NewReader(cr)
		for i := 0; ; i++ {
			at := cr.n - br.Buffered()
			if i < len(heads) && at != heads[i] {
				t.Fatalf("request %d: net/http starts at %d, the gate's head at %d\ninput %q\noutput %q", i, at, heads[i], data, out)
			}
			if i >= len(heads) {
				// After the validated heads: a refused head's stand-in, or
				// nothing at all.
				if rest := out[at:]; len(rest) > 0 && !bytes.Equal(rest, refusedHead) {
					t.Fatalf("unvalidated bytes after %d heads: %q\ninput %q", len(heads), rest, data)
				}
				return
			}
			req, err := http.ReadRequest(br)
			if err != nil {
				return // net/http refuses the head: it answers 400 and closes
			}
			if gc.open.Load() && i == len(heads)-1 {
				return // an upgrade: the handler switches or closes
			}
			_, err = io.Copy(io.Discard, req.Body)
			if err != nil {
				if cr.n-br.Buffered() == len(out) && gc.st != gateHead && !gc.broken.Load() {
					return // the input ended inside the body
				}
				if !gc.broken.Load() || i != len(heads)-1 {
					t.Fatalf("request %d: net/http fails its body (%v) where the gate passed it\ninput %q", i, err, data)
				}
				return
			}
		}
	})
}

// TestGateSplitsAnywhere: the gate's verdicts do not depend on how the
// bytes arrive.
func TestGateSplitsAnywhere(t *testing.T) {
	stream := []byte("POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n" +
		"POST /q HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /r HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
	want := append(append([]byte{}, stream[:bytes.Index(stream, []byte("GET /r"))]...), refusedHead...)
	for piece := 1; piece <= len(stream); piece++ {
		var heads []int
		gc := newGateConn(&chunkConn{data: stream, piece: piece}, 1024)
		gc.heads = &heads
		got, _ := io.ReadAll(io.LimitReader(readerFunc(gc.Read), int64(len(want))))
		if !bytes.Equal(got, want) || len(heads) != 2 || gc.refused.Load() != refuseCLAndTE {
			t.Fatalf("piece %d: heads %v refusal %v output %q", piece, heads, gc.refused.Load(), got)
		}
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
