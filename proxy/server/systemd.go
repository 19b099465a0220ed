package server

import (
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// SystemdNotifier sends notifications to systemd through NOTIFY_SOCKET; it
// does nothing when the variable is not set.
type SystemdNotifier struct {
	Logger *slog.Logger
}

var _ Notifier = SystemdNotifier{}

// Notify sends one state line.
func (n SystemdNotifier) Notify(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil && n.Logger != nil {
		n.Logger.Warn("systemd notification failed", "component", "systemd", "state", state, "err", err)
	}
}

// SystemdWatchdogInterval is half of WATCHDOG_USEC when systemd expects
// watchdog pings from this process, else 0.
func SystemdWatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0
	}
	return d / 2
}
