package revisions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// DefaultLockTimeout bounds how long installer, monitor and pruner wait for the lock.
const DefaultLockTimeout = 2 * time.Minute

// ErrLockTimeout is returned when the lock could not be taken in time.
var ErrLockTimeout = errors.New("timed out waiting for the lock")

// Lock is a held flock(2) lock on the target's lock file.
type Lock struct {
	fl *flock.Flock
}

// AcquireLock takes the exclusive lock at path, waiting until ctx is done or
// timeout passes (0 means no limit beyond ctx). The lock is released when the
// process dies, so a killed holder never blocks the others.
func AcquireLock(ctx context.Context, path string, timeout time.Duration) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock folder: %w", err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	fl := flock.New(path)
	ok, err := fl.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLockTimeout)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: %w", path, ErrLockTimeout)
	}
	return &Lock{fl: fl}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.fl == nil {
		return nil
	}
	return l.fl.Unlock()
}
