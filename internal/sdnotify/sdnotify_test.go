package sdnotify

import (
	"testing"
	"time"

	"github.com/revgate/revgate/internal/sdnotify/sdnotifytest"
)

// TestNotifyAndWatchdog speaks to a real datagram socket standing for
// systemd's NOTIFY_SOCKET.
func TestNotifyAndWatchdog(t *testing.T) {
	sock := sdnotifytest.Listen(t, 200*time.Millisecond)
	if !Enabled() {
		t.Fatal("not enabled with NOTIFY_SOCKET set")
	}
	if err := Notify("READY=1"); err != nil {
		t.Fatal(err)
	}
	if msg := sock.Read(t, time.Now().Add(5*time.Second)); msg != "READY=1" {
		t.Fatalf("read %q", msg)
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
