package server

import (
	"log/slog"
	"time"

	"github.com/revgate/revgate/internal/sdnotify"
)

// SystemdNotifier sends notifications to systemd through NOTIFY_SOCKET; it
// does nothing when the variable is not set.
type SystemdNotifier struct {
	Logger *slog.Logger
}

var _ Notifier = SystemdNotifier{}

// Notify sends one state line.
func (n SystemdNotifier) Notify(state string) {
	if err := sdnotify.Notify(state); err != nil && n.Logger != nil {
		n.Logger.Warn("systemd notification failed", "component", "systemd", "state", state, "err", err)
	}
}

// SystemdWatchdogInterval is half of WATCHDOG_USEC when systemd expects
// watchdog pings from this process, else 0.
func SystemdWatchdogInterval() time.Duration {
	d, err := sdnotify.WatchdogInterval()
	if err != nil {
		return 0
	}
	return d
}
