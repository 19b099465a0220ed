package server

import (
	"net/http"
	"time"
)

// slidingDeadline is an inactivity timeout on the reads or the writes of
// one request, as nginx's client_body_timeout and send_timeout: before each
// read or write the deadline is moved to a timeout from now. It is set
// through the request's http.ResponseController, which reaches the
// connection of an HTTP/1 request and the stream of an HTTP/2 one.
//
// A connection's deadline only bounds the reads and writes under way, so
// it can stay in place between them, and it is moved only when less than
// half the timeout is left: a long body pays one update per half timeout,
// and a read or write may wait between half the timeout and the whole.
// An HTTP/2 stream's deadline (and a read deadline, which net/http's
// background read of an HTTP/1 connection would meet between requests)
// fires on its own whether anything is under way or not: those are set
// before each call and lifted after it (perCall).
//
// Socket deadlines are on the wall clock.
type slidingDeadline struct {
	at      time.Time // the deadline in force; zero when none is set
	perCall bool
	write   bool // the write deadline, else the read deadline
}

// arm moves the deadline to timeout from now, unless more than half of it
// is left; a timeout <= 0 sets none.
func (d *slidingDeadline) arm(c *http.ResponseController, timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	now := time.Now()
	if !d.perCall && !d.at.IsZero() && d.at.Sub(now) >= timeout/2 {
		return
	}
	d.set(c, now.Add(timeout))
}

// disarm lifts a per-call deadline after its call.
func (d *slidingDeadline) disarm(c *http.ResponseController) {
	if d.perCall && !d.at.IsZero() {
		d.set(c, time.Time{})
	}
}

func (d *slidingDeadline) set(c *http.ResponseController, at time.Time) {
	d.at = at
	if d.write {
		_ = c.SetWriteDeadline(at)
	} else {
		_ = c.SetReadDeadline(at)
	}
}
