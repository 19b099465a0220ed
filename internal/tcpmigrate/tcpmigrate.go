// Package tcpmigrate turns on Linux's net.ipv4.tcp_migrate_req, which moves
// the connections waiting in a closing SO_REUSEPORT listener's accept queue
// to another listener of the same group instead of resetting them. With it a
// make-before-break replacement of the gateway drops no connection when the
// old process closes its listeners.
package tcpmigrate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Path is the sysctl's file in procfs.
const Path = "/proc/sys/net/ipv4/tcp_migrate_req"

// Enabled reports whether the sysctl is set; false when it does not exist
// (kernels before 5.14, other systems).
func Enabled() bool {
	data, err := os.ReadFile(Path)
	return err == nil && bytes.Equal(bytes.TrimSpace(data), []byte("1"))
}

// ErrUnsupported is returned when the kernel has no such sysctl.
var ErrUnsupported = errors.New("net.ipv4.tcp_migrate_req is not supported here")

// Enable sets the sysctl to 1 when it is not set yet. It reports whether it
// changed anything; it fails without root or in a read-only /proc/sys.
func Enable() (changed bool, err error) {
	data, err := os.ReadFile(Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, ErrUnsupported
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", Path, err)
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("1")) {
		return false, nil
	}
	if err := os.WriteFile(Path, []byte("1\n"), 0o644); err != nil {
		return false, fmt.Errorf("set net.ipv4.tcp_migrate_req=1: %w", err)
	}
	return true, nil
}
