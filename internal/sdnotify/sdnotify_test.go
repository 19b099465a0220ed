package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestNotifyAndWatchdog speaks to a real datagram socket standing for
// systemd's NOTIFY_SOCKET.
func TestNotifyAndWatchdog(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if !Enabled() {
		t.Fatal("not enabled with NOTIFY_SOCKET set")
	}
	if err := Notify("READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if d, err := WatchdogInterval(); err != nil || d != 100*time.Millisecond {
		t.Fatalf("WatchdogInterval = %v, %v; want 100ms", d, err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if Enabled() {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	if err := Notify("READY=1"); err != nil {
		t.Fatalf("Notify without systemd: %v", err)
	}
}
