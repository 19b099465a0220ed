package supervise

import (
	"fmt"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Systemd returns a Notifier speaking sd_notify to the service manager, and
// the interval at which to send WATCHDOG=1 (half of WatchdogSec; 0 without
// a watchdog for this process). ok is false when NOTIFY_SOCKET is not set,
// i.e. not running as a Type=notify service.
func Systemd() (n Notifier, watchdog time.Duration, ok bool, err error) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil, 0, false, nil
	}
	n = NotifierFunc(func(state string) error {
		if _, err := daemon.SdNotify(false, state); err != nil {
			return fmt.Errorf("sd_notify %q: %w", state, err)
		}
		return nil
	})
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return n, 0, true, fmt.Errorf("read the systemd watchdog settings: %w", err)
	}
	return n, d / 2, true, nil
}
