// Package fsfault wraps a revisions.FS so that tests can fail its Nth
// operation: once (the caller sees one error and goes on with its error
// path), or for good (everything from the Nth operation on fails, as if the
// process had died there and nothing more reached the disk).
package fsfault

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/revgate/revgate/revisions"
)

// ErrInjected is the error returned by a failed operation.
var ErrInjected = errors.New("injected fault")

// Mode says what happens from the Nth operation on.
type Mode int

const (
	// Once fails only the Nth operation.
	Once Mode = iota
	// Crash fails the Nth operation and every later one.
	Crash
)

// Injector counts operations and fails the chosen one.
type Injector struct {
	mu   sync.Mutex
	n    int
	at   int
	mode Mode
	hit  string
}

// New returns an Injector failing operation at (1-based; 0 never fails) in
// the given mode.
func New(at int, mode Mode) *Injector { return &Injector{at: at, mode: mode} }

// Count is how many operations were attempted.
func (j *Injector) Count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// Hit names the operation that was failed, "" when none was.
func (j *Injector) Hit() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.hit
}

func (j *Injector) check(op, name string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.n++
	fail := j.at > 0 && (j.n == j.at || (j.mode == Crash && j.n > j.at))
	if !fail {
		return nil
	}
	if j.n == j.at {
		j.hit = op + " " + name
	}
	return fmt.Errorf("%s %s (operation %d): %w", op, name, j.n, ErrInjected)
}

type file struct {
	j    *Injector
	name string
	f    revisions.File
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.j.check("write", f.name); err != nil {
		// A torn write: half the data reaches the file.
		n, _ := f.f.Write(p[:len(p)/2])
		return n, err
	}
	return f.f.Write(p)
}

func (f *file) Sync() error {
	if err := f.j.check("sync", f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *file) Close() error {
	if err := f.j.check("close", f.name); err != nil {
		f.f.Close()
		return err
	}
	return f.f.Close()
}

// Wrap returns base with every operation counted by j.
func (j *Injector) Wrap(base revisions.FS) revisions.FS {
	return revisions.FS{
		MkdirAll: func(p string, perm os.FileMode) error {
			if err := j.check("mkdirall", p); err != nil {
				return err
			}
			return base.MkdirAll(p, perm)
		},
		Mkdir: func(p string, perm os.FileMode) error {
			if err := j.check("mkdir", p); err != nil {
				return err
			}
			return base.Mkdir(p, perm)
		},
		OpenFile: func(name string, flag int, perm os.FileMode) (revisions.File, error) {
			if err := j.check("open", name); err != nil {
				return nil, err
			}
			f, err := base.OpenFile(name, flag, perm)
			if err != nil {
				return nil, err
			}
			return &file{j: j, name: name, f: f}, nil
		},
		Rename: func(o, n string) error {
			if err := j.check("rename", o+" -> "+n); err != nil {
				return err
			}
			return base.Rename(o, n)
		},
		Remove: func(p string) error {
			if err := j.check("remove", p); err != nil {
				return err
			}
			return base.Remove(p)
		},
		RemoveAll: func(p string) error {
			if err := j.check("removeall", p); err != nil {
				return err
			}
			return base.RemoveAll(p)
		},
		Symlink: func(o, n string) error {
			if err := j.check("symlink", n); err != nil {
				return err
			}
			return base.Symlink(o, n)
		},
		Readlink: func(p string) (string, error) {
			if err := j.check("readlink", p); err != nil {
				return "", err
			}
			return base.Readlink(p)
		},
		ReadFile: func(p string) ([]byte, error) {
			if err := j.check("readfile", p); err != nil {
				return nil, err
			}
			return base.ReadFile(p)
		},
		ReadDir: func(p string) ([]os.DirEntry, error) {
			if err := j.check("readdir", p); err != nil {
				return nil, err
			}
			return base.ReadDir(p)
		},
		Lstat: func(p string) (os.FileInfo, error) {
			if err := j.check("lstat", p); err != nil {
				return nil, err
			}
			return base.Lstat(p)
		},
		Stat: func(p string) (os.FileInfo, error) {
			if err := j.check("stat", p); err != nil {
				return nil, err
			}
			return base.Stat(p)
		},
		SyncDir: func(p string) error {
			if err := j.check("syncdir", p); err != nil {
				return err
			}
			return base.SyncDir(p)
		},
	}
}

// NoSync returns base without fsyncs (revisions.FS.WithoutSync): for tests
// that run many installs and test crash consistency of the process, not
// durability across power loss, where thousands of fsyncs only cost time.
func NoSync(base revisions.FS) revisions.FS { return base.WithoutSync() }
