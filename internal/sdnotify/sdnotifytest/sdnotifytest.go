// Package sdnotifytest stands for systemd in tests: a datagram socket set
// as NOTIFY_SOCKET, with a watchdog, that records what the process sends.
package sdnotifytest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Socket is systemd's notification socket as a test sees it.
type Socket struct {
	conn *net.UnixConn
}

// Listen creates the socket and sets NOTIFY_SOCKET, WATCHDOG_USEC (to
// watchdog) and WATCHDOG_PID (this process) for the rest of the test.
func Listen(t *testing.T, watchdog time.Duration) *Socket {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", strconv.FormatInt(watchdog.Microseconds(), 10))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	return &Socket{conn: conn}
}

// Read returns the next notification (its state lines), failing the test
// when none comes before deadline.
func (s *Socket) Read(t *testing.T, deadline time.Time) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = s.conn.SetReadDeadline(deadline)
	n, err := s.conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}
