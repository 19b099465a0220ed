package supervise

import (
	"time"

	"k8s.io/utils/clock"
)

// sleep waits for d on clock c; it reports false when done is closed first.
func sleep(c clock.Clock, d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-done:
		return false
	}
}
