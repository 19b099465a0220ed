package revisions

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// File is the part of *os.File that durable writes use.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// FS is the file-system seam: every file-system operation of this package,
// and of the installer, monitor and pruner built on it, goes through one of
// these functions. OS returns the real one; tests swap a function to inject a
// fault (fail the Nth write, fail an fsync, crash before a rename).
type FS struct {
	MkdirAll  func(path string, perm os.FileMode) error
	Mkdir     func(path string, perm os.FileMode) error
	OpenFile  func(name string, flag int, perm os.FileMode) (File, error)
	Rename    func(oldpath, newpath string) error
	Remove    func(name string) error
	RemoveAll func(path string) error
	Symlink   func(oldname, newname string) error
	Readlink  func(name string) (string, error)
	ReadFile  func(name string) ([]byte, error)
	ReadDir   func(name string) ([]os.DirEntry, error)
	Lstat     func(name string) (os.FileInfo, error)
	Stat      func(name string) (os.FileInfo, error)
	// SyncDir fsyncs a folder so that renames and creations in it are durable.
	SyncDir func(path string) error
}

// OS returns the seam backed by package os.
func OS() FS {
	return FS{
		MkdirAll: os.MkdirAll,
		Mkdir:    os.Mkdir,
		OpenFile: func(name string, flag int, perm os.FileMode) (File, error) {
			return os.OpenFile(name, flag, perm)
		},
		Rename:    os.Rename,
		Remove:    os.Remove,
		RemoveAll: os.RemoveAll,
		Symlink:   os.Symlink,
		Readlink:  os.Readlink,
		ReadFile:  os.ReadFile,
		ReadDir:   os.ReadDir,
		Lstat:     os.Lstat,
		Stat:      os.Stat,
		SyncDir:   syncDir,
	}
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// tempSuffix marks temp files and staging folders; with a leading dot the
// kubelet (and revgate supervise) never parse them.
const tempMarker = ".tmp-"

func tempName(dir, base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(dir, "."+base+tempMarker+hex.EncodeToString(b[:]))
}

// IsTempName reports whether a file name is one of our temp files or staging
// folders (left behind only by a crash).
func IsTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// WriteFile writes data to path durably and atomically: a dotfile temp in the
// same folder, write, fsync, close, rename over path, fsync the folder. A
// crash at any point leaves either the old file or the new one, never a
// partial file under path.
func (f FS) WriteFile(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp := tempName(dir, base)
	if err := f.writeNew(tmp, data, perm); err != nil {
		_ = f.Remove(tmp)
		return err
	}
	if err := f.Rename(tmp, path); err != nil {
		_ = f.Remove(tmp)
		return fmt.Errorf("rename %s into place: %w", path, err)
	}
	if err := f.SyncDir(dir); err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	return nil
}

// writeNew creates a new file (it must not exist), writes and fsyncs it.
func (f FS) writeNew(path string, data []byte, perm os.FileMode) error {
	return f.create(path, data, perm, true)
}

// create creates a new file (it must not exist) and writes it, fsyncing it
// when sync is set.
func (f FS) create(path string, data []byte, perm os.FileMode, sync bool) error {
	w, err := f.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if sync {
		if err := w.Sync(); err != nil {
			w.Close()
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// syncFile opens an existing file and fsyncs it.
func (f FS) syncFile(path string) error {
	r, err := f.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s to sync it: %w", path, err)
	}
	if err := r.Sync(); err != nil {
		r.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := r.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// stageSyncers is how many staged files are fsynced at once: file systems
// fold concurrent fsyncs into one journal commit, so a revision of
// thousands of files becomes durable in a fraction of the time that
// syncing them one after the other takes.
const stageSyncers = 16

// Stage is a folder being filled before it is renamed into place whole.
type Stage struct {
	fs   FS
	root string
	dirs []string
	// files are written but not yet synced; StageDir syncs them all before
	// the rename.
	files []string
}

// Root is the staging folder's path.
func (s *Stage) Root() string { return s.root }

// WriteFile writes rel (a slash-separated path inside the stage) with perm,
// creating parent folders with dirPerm. rel must stay inside the stage.
func (s *Stage) WriteFile(rel string, data []byte, perm, dirPerm os.FileMode) error {
	p, err := SafeJoin(s.root, rel)
	if err != nil {
		return err
	}
	if err := s.mkdirs(filepath.Dir(p), dirPerm); err != nil {
		return err
	}
	if err := s.fs.create(p, data, perm, false); err != nil {
		return err
	}
	s.files = append(s.files, p)
	return nil
}

// syncFiles fsyncs every file written into the stage, stageSyncers at a
// time; the first error is returned once all are done.
func (s *Stage) syncFiles() error {
	paths := make(chan string)
	errs := make(chan error, stageSyncers)
	var wg sync.WaitGroup
	for i := 0; i < min(stageSyncers, len(s.files)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for p := range paths {
				if err := s.fs.syncFile(p); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, p := range s.files {
		paths <- p
	}
	close(paths)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Stage) mkdirs(dir string, perm os.FileMode) error {
	if dir == s.root {
		return nil
	}
	if _, err := s.fs.Lstat(dir); err == nil {
		return nil
	}
	if err := s.mkdirs(filepath.Dir(dir), perm); err != nil {
		return err
	}
	if err := s.fs.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create folder %s: %w", dir, err)
	}
	s.dirs = append(s.dirs, dir)
	return nil
}

// StageDir builds the folder final: it creates a dotfile staging folder next
// to it, lets fill write into it, fsyncs every file (concurrently) and every
// folder of it, renames it to final in one step and fsyncs the parent.
// final must not exist. On any error the staging folder is removed and
// final is untouched.
func (f FS) StageDir(final string, perm os.FileMode, fill func(*Stage) error) error {
	parent, base := filepath.Split(filepath.Clean(final))
	if parent == "" {
		parent = "."
	}
	if _, err := f.Lstat(final); err == nil {
		return fmt.Errorf("stage %s: %w", final, fs.ErrExist)
	}
	s := &Stage{fs: f, root: tempName(parent, base)}
	if err := f.Mkdir(s.root, perm); err != nil {
		return fmt.Errorf("create staging folder for %s: %w", final, err)
	}
	err := func() error {
		if err := fill(s); err != nil {
			return err
		}
		if err := s.syncFiles(); err != nil {
			return err
		}
		// Deepest folders first, the root last.
		for i := len(s.dirs) - 1; i >= 0; i-- {
			if err := f.SyncDir(s.dirs[i]); err != nil {
				return fmt.Errorf("sync %s: %w", s.dirs[i], err)
			}
		}
		if err := f.SyncDir(s.root); err != nil {
			return fmt.Errorf("sync %s: %w", s.root, err)
		}
		if err := f.Rename(s.root, final); err != nil {
			return fmt.Errorf("rename %s into place: %w", final, err)
		}
		return nil
	}()
	if err != nil {
		_ = f.RemoveAll(s.root)
		return err
	}
	if err := f.SyncDir(parent); err != nil {
		return fmt.Errorf("sync folder of %s: %w", final, err)
	}
	return nil
}

// ReplaceSymlink points link at target atomically: a new link under a dotfile
// temp name, renamed over the old one, then the folder fsynced. Readers see the
// old target or the new one, never a missing link.
func (f FS) ReplaceSymlink(link, target string) error {
	dir, base := filepath.Split(link)
	if dir == "" {
		dir = "."
	}
	tmp := tempName(dir, base)
	if err := f.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create link %s: %w", tmp, err)
	}
	if err := f.Rename(tmp, link); err != nil {
		_ = f.Remove(tmp)
		return fmt.Errorf("rename link %s into place: %w", link, err)
	}
	if err := f.SyncDir(dir); err != nil {
		return fmt.Errorf("sync folder of %s: %w", link, err)
	}
	return nil
}

// RemoveFile removes path and fsyncs its folder; a missing file is not an error.
func (f FS) RemoveFile(path string) error {
	if err := f.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := f.SyncDir(dir); err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	return nil
}

// RemoveStale removes the temp files and staging folders that a crash left in
// dir. Call it under the lock.
func (f FS) RemoveStale(dir string) error {
	entries, err := f.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range entries {
		if IsTempName(e.Name()) {
			if err := f.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove stale %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// ErrPathEscape is returned for a configuration key that would leave its folder.
var ErrPathEscape = errors.New("path escapes its folder")

// SafeJoin joins rel (slash-separated) under root and refuses absolute paths,
// ".." elements, empty elements and NUL bytes, so that no configuration key
// can write outside its folder.
func SafeJoin(root, rel string) (string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.ContainsRune(rel, 0) || strings.Contains(rel, "\\") {
		return "", fmt.Errorf("%q: %w", rel, ErrPathEscape)
	}
	for _, el := range strings.Split(rel, "/") {
		if el == "" || el == "." || el == ".." {
			return "", fmt.Errorf("%q: %w", rel, ErrPathEscape)
		}
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}

// ValidKey reports whether name is a valid ConfigMap/Secret key or object
// name for a single path element: no '/', not "." or "..", not empty, and
// not starting with a dot-temp marker.
func ValidKey(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("key %q: %w", name, ErrPathEscape)
	}
	return nil
}

// Publish puts a manifest into the manifests dir the way the kubelet expects:
// the old file is removed first (so a file watcher sees a new file, not an
// in-place change), then the new one is written through a dotfile temp and a
// rename, and the folder is fsynced. The kubelet never sees a partial file.
func (f FS) Publish(path string, data []byte) error {
	if err := f.RemoveFile(path); err != nil {
		return err
	}
	return f.WriteFile(path, data, 0o644)
}

// RemoveDir removes the folder path crash-safely: it is first renamed to a
// dotfile temp name in the same folder (and the folder fsynced), then removed
// with everything in it. A crash part-way leaves either the whole folder under
// its real name or a temp folder that RemoveStale cleans up, never a
// half-removed folder under its real name. A missing folder is not an error.
func (f FS) RemoveDir(path string) error {
	path = filepath.Clean(path)
	if _, err := f.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	parent, base := filepath.Split(path)
	if parent == "" {
		parent = "."
	}
	tmp := tempName(parent, base)
	if err := f.Rename(path, tmp); err != nil {
		return fmt.Errorf("move %s aside: %w", path, err)
	}
	if err := f.SyncDir(parent); err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	if err := f.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	return nil
}

// WithoutSync returns f with fsync of files and folders turned into no-ops,
// for throw-away copies (a configuration staged for validation) whose
// durability does not matter; renames stay atomic.
func (f FS) WithoutSync() FS {
	open := f.OpenFile
	f.OpenFile = func(name string, flag int, perm os.FileMode) (File, error) {
		file, err := open(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return noSyncFile{file}, nil
	}
	f.SyncDir = func(string) error { return nil }
	return f
}

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }
