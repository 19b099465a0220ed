package supervise

import (
	"time"

	"github.com/revgate/revgate/internal/sdnotify"
)

// Systemd returns a Notifier speaking sd_notify to the service manager, and
// the interval at which to send WATCHDOG=1 (half of WatchdogSec; 0 without
// a watchdog for this process). ok is false when NOTIFY_SOCKET is not set,
// i.e. not running as a Type=notify service.
func Systemd() (n Notifier, watchdog time.Duration, ok bool, err error) {
	if !sdnotify.Enabled() {
		return nil, 0, false, nil
	}
	watchdog, err = sdnotify.WatchdogInterval()
	return NotifierFunc(sdnotify.Notify), watchdog, true, err
}
