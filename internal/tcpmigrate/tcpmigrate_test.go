package tcpmigrate

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// TestEnable checks Enable against the kernel's own file: afterwards the
// sysctl is set, or Enable said why it could not be.
func TestEnable(t *testing.T) {
	_, err := Enable()
	switch {
	case errors.Is(err, ErrUnsupported):
		if _, statErr := os.Stat(Path); statErr == nil {
			t.Fatalf("Enable says unsupported but %s exists", Path)
		}
		t.Skip("no tcp_migrate_req here")
	case err != nil:
		t.Skipf("not permitted here: %v", err)
	}
	data, err := os.ReadFile(Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(data), []byte("1")) || !Enabled() {
		t.Fatalf("after Enable the sysctl reads %q", data)
	}
	if changed, err := Enable(); err != nil || changed {
		t.Fatalf("second Enable: changed %v, err %v; want no change", changed, err)
	}
}
