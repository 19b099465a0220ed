package installertest

import (
	"path/filepath"
	"testing"

	"github.com/revgate/revgate/revisions"
)

// TempLayout is the layout of target "gw" under a fresh temporary folder,
// every path filled in.
func TempLayout(t testing.TB) revisions.Layout {
	t.Helper()
	root := t.TempDir()
	return revisions.Layout{
		Target:         "gw",
		ResourceDir:    filepath.Join(root, "resources"),
		ManifestsDir:   filepath.Join(root, "manifests"),
		LockFile:       filepath.Join(root, "lock", "gw.lock"),
		TerminationLog: filepath.Join(root, "log", "termination.log"),
	}.Defaulted()
}
