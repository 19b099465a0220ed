// Package sdnotify is revgate's one wrapper of go-systemd's daemon package:
// the sd_notify protocol (READY=1, STATUS=, WATCHDOG=1, STOPPING=1) and the
// watchdog interval, for the gateway and the supervisor alike.
package sdnotify

import (
	"fmt"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Enabled reports whether the process runs as a systemd Type=notify
// service (NOTIFY_SOCKET is set).
func Enabled() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

// Notify sends one state line to the service manager; it does nothing when
// not Enabled.
func Notify(state string) error {
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("sd_notify %q: %w", state, err)
	}
	return nil
}

// WatchdogInterval is how often to send WATCHDOG=1: half of WatchdogSec
// when systemd expects pings from this process, else 0.
func WatchdogInterval() (time.Duration, error) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("read the systemd watchdog settings: %w", err)
	}
	return d / 2, nil
}
