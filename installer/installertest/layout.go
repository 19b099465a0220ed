package installertest

import (
	"os"
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

// SourceDir writes files (slash-separated relative path to content) into
// a fresh temporary folder, a local source, and returns the folder.
func SourceDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
