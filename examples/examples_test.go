package examples

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The embedded files are the folder's YAML files, byte for byte: a file
// added to the folder and not to the binary would make `revgate run` serve
// another demo than `make run`.
func TestFSMatchesFolder(t *testing.T) {
	onDisk, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := fs.Glob(FS(), "*")
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) == 0 || len(onDisk) != len(embedded) {
		t.Fatalf("embedded %q, folder %q", embedded, onDisk)
	}
	for _, name := range onDisk {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatalf("%s not embedded: %v", name, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: embedded copy differs from the folder", name)
		}
	}
}
