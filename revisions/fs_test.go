package revisions_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/revgate/revgate/revisions"
	"github.com/revgate/revgate/revisions/fsfault"
)

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// countOps runs op on a counting seam and returns how many operations it made.
func countOps(t *testing.T, op func(f revisions.FS) error) int {
	t.Helper()
	j := fsfault.New(0, fsfault.Once)
	if err := op(j.Wrap(revisions.OS())); err != nil {
		t.Fatalf("fault-free run failed: %v", err)
	}
	if j.Count() == 0 {
		t.Fatal("operation made no file-system calls")
	}
	return j.Count()
}

var modes = []struct {
	name string
	mode fsfault.Mode
}{{"once", fsfault.Once}, {"crash", fsfault.Crash}}

func TestWriteFileFaultAtEveryStep(t *testing.T) {
	old, new := []byte("old content\n"), bytes.Repeat([]byte("new content\n"), 100)
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f"), old, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := setup(t)
	total := countOps(t, func(f revisions.FS) error { return f.WriteFile(filepath.Join(dir, "f"), new, 0o600) })
	for _, m := range modes {
		for n := 1; n <= total; n++ {
			dir := setup(t)
			path := filepath.Join(dir, "f")
			j := fsfault.New(n, m.mode)
			err := j.Wrap(revisions.OS()).WriteFile(path, new, 0o600)
			if !errors.Is(err, fsfault.ErrInjected) {
				t.Fatalf("%s fault %d (%s): want an injected error, got %v", m.name, n, j.Hit(), err)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatalf("%s fault %d (%s): %v", m.name, n, j.Hit(), rerr)
			}
			if !bytes.Equal(got, old) && !bytes.Equal(got, new) {
				t.Fatalf("%s fault %d (%s): partial file under the real name: %q", m.name, n, j.Hit(), got)
			}
			names := entries(t, dir)
			for _, name := range names {
				if name != "f" && !revisions.IsTempName(name) {
					t.Fatalf("%s fault %d: unexpected file %s", m.name, n, name)
				}
			}
			if m.mode == fsfault.Once && len(names) != 1 {
				t.Fatalf("once fault %d (%s): temp file left behind: %v", n, j.Hit(), names)
			}
			if err := revisions.OS().RemoveStale(dir); err != nil {
				t.Fatal(err)
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Fatalf("RemoveStale left %v", names)
			}
		}
	}
	// The fault-free write replaces the content with the new mode.
	if err := revisions.OS().WriteFile(filepath.Join(dir, "f"), new, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after write: %v %v", fi.Mode(), err)
	}
}

func fillStage(s *revisions.Stage) error {
	for _, f := range []struct {
		rel        string
		perm, dirP os.FileMode
	}{
		{"configmaps/a/k1", 0o644, 0o755},
		{"configmaps/a/k2", 0o644, 0o755},
		{"secrets/s/tls.key", 0o600, 0o700},
		{"pod.yaml", 0o644, 0o755},
	} {
		if err := s.WriteFile(f.rel, []byte("content of "+f.rel), f.perm, f.dirP); err != nil {
			return err
		}
	}
	return nil
}

// checkStaged fails unless final is absent or holds exactly what fillStage writes.
func checkStaged(t *testing.T, final string) bool {
	t.Helper()
	if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
		return false
	}
	var got []string
	err := filepath.WalkDir(final, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(final, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if string(data) != "content of "+filepath.ToSlash(rel) {
			t.Fatalf("%s holds %q", rel, data)
		}
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"configmaps/a/k1", "configmaps/a/k2", "pod.yaml", "secrets/s/tls.key"}
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("incomplete folder under its real name: %v", got)
	}
	return true
}

func TestStageDirFaultAtEveryStep(t *testing.T) {
	parent := t.TempDir()
	total := countOps(t, func(f revisions.FS) error {
		return f.StageDir(filepath.Join(parent, "rev-1"), 0o755, fillStage)
	})
	if !checkStaged(t, filepath.Join(parent, "rev-1")) {
		t.Fatal("fault-free stage produced nothing")
	}
	fi, err := os.Stat(filepath.Join(parent, "rev-1", "secrets", "s", "tls.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret mode %v %v", fi.Mode(), err)
	}
	fi, err = os.Stat(filepath.Join(parent, "rev-1", "secrets"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("secrets folder mode %v %v", fi.Mode(), err)
	}
	for _, m := range modes {
		for n := 1; n <= total; n++ {
			parent := t.TempDir()
			final := filepath.Join(parent, "rev-1")
			j := fsfault.New(n, m.mode)
			err := j.Wrap(revisions.OS()).StageDir(final, 0o755, fillStage)
			complete := checkStaged(t, final)
			switch {
			case err == nil && !complete:
				t.Fatalf("%s fault %d (%s): no error and no folder", m.name, n, j.Hit())
			case err != nil && !errors.Is(err, fsfault.ErrInjected):
				t.Fatalf("%s fault %d (%s): want an injected error, got %v", m.name, n, j.Hit(), err)
			}
			names := entries(t, parent)
			if m.mode == fsfault.Once {
				for _, name := range names {
					if name != "rev-1" {
						t.Fatalf("once fault %d (%s): left %v", n, j.Hit(), names)
					}
				}
			}
			if err := revisions.OS().RemoveStale(parent); err != nil {
				t.Fatal(err)
			}
			for _, name := range entries(t, parent) {
				if name != "rev-1" {
					t.Fatalf("RemoveStale left %s", name)
				}
			}
		}
	}
}

func TestStageDirRefusesExistingAndEscapes(t *testing.T) {
	parent := t.TempDir()
	final := filepath.Join(parent, "rev")
	if err := os.Mkdir(final, 0o755); err != nil {
		t.Fatal(err)
	}
	err := revisions.OS().StageDir(final, 0o755, fillStage)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("want ErrExist, got %v", err)
	}
	final2 := filepath.Join(parent, "rev2")
	err = revisions.OS().StageDir(final2, 0o755, func(s *revisions.Stage) error {
		return s.WriteFile("../escape", []byte("x"), 0o644, 0o755)
	})
	if !errors.Is(err, revisions.ErrPathEscape) {
		t.Fatalf("want ErrPathEscape, got %v", err)
	}
	if names := entries(t, parent); len(names) != 1 || names[0] != "rev" {
		t.Fatalf("left %v", names)
	}
}

func TestReplaceSymlink(t *testing.T) {
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		for _, n := range []string{"a", "b"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir := setup(t)
	total := countOps(t, func(f revisions.FS) error { return f.ReplaceSymlink(filepath.Join(dir, "link"), "b") })
	if got, _ := os.ReadFile(filepath.Join(dir, "link")); string(got) != "b" {
		t.Fatalf("link resolves to %q, want b", got)
	}
	// A link that does not exist yet is created.
	if err := revisions.OS().ReplaceSymlink(filepath.Join(dir, "new"), "a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(filepath.Join(dir, "new")); got != "a" {
		t.Fatalf("new link points at %q", got)
	}
	for _, m := range modes {
		for n := 1; n <= total; n++ {
			dir := setup(t)
			j := fsfault.New(n, m.mode)
			err := j.Wrap(revisions.OS()).ReplaceSymlink(filepath.Join(dir, "link"), "b")
			if !errors.Is(err, fsfault.ErrInjected) {
				t.Fatalf("%s fault %d: want an injected error, got %v", m.name, n, err)
			}
			got, err := os.ReadFile(filepath.Join(dir, "link"))
			if err != nil || (string(got) != "a" && string(got) != "b") {
				t.Fatalf("%s fault %d (%s): link resolves to %q, %v", m.name, n, j.Hit(), got, err)
			}
		}
	}
}

func TestRemoveDirFaultAtEveryStep(t *testing.T) {
	setup := func(t *testing.T) string {
		parent := t.TempDir()
		if err := revisions.OS().StageDir(filepath.Join(parent, "rev-1"), 0o755, fillStage); err != nil {
			t.Fatal(err)
		}
		return parent
	}
	parent := setup(t)
	total := countOps(t, func(f revisions.FS) error { return f.RemoveDir(filepath.Join(parent, "rev-1")) })
	if names := entries(t, parent); len(names) != 0 {
		t.Fatalf("left %v", names)
	}
	if err := revisions.OS().RemoveDir(filepath.Join(parent, "missing")); err != nil {
		t.Fatalf("missing folder: %v", err)
	}
	for _, m := range modes {
		for n := 1; n <= total; n++ {
			parent := setup(t)
			final := filepath.Join(parent, "rev-1")
			j := fsfault.New(n, m.mode)
			err := j.Wrap(revisions.OS()).RemoveDir(final)
			if err != nil && !errors.Is(err, fsfault.ErrInjected) {
				t.Fatalf("%s fault %d: want an injected error, got %v", m.name, n, err)
			}
			if checkStaged(t, final) && err == nil { // whole or gone
				t.Fatalf("%s fault %d (%s): no error and the folder is still there", m.name, n, j.Hit())
			}
			if err := revisions.OS().RemoveStale(parent); err != nil {
				t.Fatal(err)
			}
			for _, name := range entries(t, parent) {
				if name != "rev-1" {
					t.Fatalf("left %s", name)
				}
			}
		}
	}
}

func TestPublishRemovesThenWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x-pod.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file watcher must see a new file: the old one is removed before the
	// new one is renamed into place under its name.
	var ops []string
	f := revisions.OS()
	remove, rename := f.Remove, f.Rename
	f.Remove = func(p string) error {
		if p == path {
			ops = append(ops, "remove")
		}
		return remove(p)
	}
	f.Rename = func(o, n string) error {
		if n == path {
			if !revisions.IsTempName(filepath.Base(o)) {
				t.Errorf("renamed from %s, not a dotfile temp", o)
			}
			ops = append(ops, "rename")
		}
		return rename(o, n)
	}
	if err := f.Publish(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0] != "remove" || ops[1] != "rename" {
		t.Fatalf("operations on the manifest: %v, want [remove rename]", ops)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" || after.Mode().Perm() != 0o644 {
		t.Fatalf("got %q mode %v", got, after.Mode())
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Fatalf("left %v", names)
	}
}

func TestSafeJoinAndValidKey(t *testing.T) {
	for _, rel := range []string{"", "/etc/passwd", "..", "../x", "a/../../x", "a//b", "a/./b", "./a", "a/", "a\\b", "a\x00b"} {
		t.Run("refuse "+rel, func(t *testing.T) {
			if p, err := revisions.SafeJoin("/root", rel); !errors.Is(err, revisions.ErrPathEscape) {
				t.Fatalf("SafeJoin(%q) = %q, %v; want ErrPathEscape", rel, p, err)
			}
		})
	}
	for rel, want := range map[string]string{"a": "/root/a", "a/b.yaml": "/root/a/b.yaml", "..a": "/root/..a", ".hidden": "/root/.hidden"} {
		if p, err := revisions.SafeJoin("/root", rel); err != nil || p != want {
			t.Errorf("SafeJoin(%q) = %q, %v; want %q", rel, p, err, want)
		}
	}
	for _, k := range []string{"", ".", "..", "a/b", "a\\b", "a\x00"} {
		if err := revisions.ValidKey(k); !errors.Is(err, revisions.ErrPathEscape) {
			t.Errorf("ValidKey(%q) = %v, want ErrPathEscape", k, err)
		}
	}
	for _, k := range []string{"tls.crt", "..data2", "a-b_c.d", ".x"} {
		if err := revisions.ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v", k, err)
		}
	}
}

func TestWithoutSync(t *testing.T) {
	var syncs int
	f := revisions.OS()
	f.SyncDir = func(string) error { syncs++; return nil }
	open := f.OpenFile
	f.OpenFile = func(name string, flag int, perm os.FileMode) (revisions.File, error) {
		file, err := open(name, flag, perm)
		return countingSync{file, &syncs}, err
	}
	dir := t.TempDir()
	if err := f.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil || syncs != 2 {
		t.Fatalf("with syncs: %d syncs, %v", syncs, err)
	}
	syncs = 0
	if err := f.WithoutSync().WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644); err != nil || syncs != 0 {
		t.Fatalf("without syncs: %d syncs, %v", syncs, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "b")); string(got) != "b" {
		t.Fatalf("content %q", got)
	}
}

type countingSync struct {
	revisions.File
	n *int
}

func (c countingSync) Sync() error { *c.n++; return c.File.Sync() }

// BenchmarkStageDir writes a revision folder of 1,000 small files, durably:
// what one snapshot of a cluster with 1,000 objects costs the installer.
func BenchmarkStageDir(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 600)
	parent := b.TempDir()
	for i := 0; i < b.N; i++ {
		err := revisions.OS().StageDir(filepath.Join(parent, fmt.Sprint("rev-", i)), 0o755, func(s *revisions.Stage) error {
			for k := 0; k < 1000; k++ {
				if err := s.WriteFile(fmt.Sprintf("configmaps/objects/%04d.yaml", k), data, 0o644, 0o755); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
