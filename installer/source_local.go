package installer

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/revgate/revgate/revisions"
)

// Source yields the configuration of a new revision.
type Source interface {
	Load(ctx context.Context) (*Config, error)
}

// DefaultConfigMap is the ConfigMap that plain files at the top of a local
// source folder become keys of.
const DefaultConfigMap = "config"

// LocalSource reads a folder holding configmaps/<name>/<key> and
// secrets/<name>/<key>; plain files at its top level become keys of the
// ConfigMap "config". Symbolic links are followed. Entries whose names start
// with a dot are skipped with a log line at every level: a .git folder, an
// editor's swap file, or the ..data links of a mounted ConfigMap are not
// configuration. Go source files at the top are skipped too: the examples
// folder holds the package that embeds it into the binary.
type LocalSource struct {
	// Dir is the source folder.
	Dir string
	// FS is the file-system seam; default revisions.OS().
	FS revisions.FS
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (s *LocalSource) skip(p string) bool {
	if !strings.HasPrefix(filepath.Base(p), ".") {
		return false
	}
	s.logger().Info("skipping hidden entry of the source folder", "component", "installer", "path", p)
	return true
}

// skipTop is skip for entries at the top of the folder, which also skips
// Go source files.
func (s *LocalSource) skipTop(p string) bool {
	if s.skip(p) {
		return true
	}
	if filepath.Ext(p) != ".go" {
		return false
	}
	s.logger().Info("skipping Go source file of the source folder", "component", "installer", "path", p)
	return true
}

func (s *LocalSource) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

var _ Source = (*LocalSource)(nil)

// Load reads the folder.
func (s *LocalSource) Load(ctx context.Context) (*Config, error) {
	f := s.FS
	if f.ReadDir == nil {
		f = revisions.OS()
	}
	entries, err := f.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("read source folder: %w", err)
	}
	c := &Config{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := e.Name()
		p := filepath.Join(s.Dir, name)
		if s.skipTop(p) {
			continue
		}
		fi, err := f.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read source folder: %w", err)
		}
		switch {
		case fi.IsDir() && name == ConfigMapsDir:
			err = s.loadObjects(f, p, c.AddConfigMapKey)
		case fi.IsDir() && name == SecretsDir:
			err = s.loadObjects(f, p, c.AddSecretKey)
		case fi.IsDir():
			err = fmt.Errorf("unexpected folder %s in source: want %s/, %s/ or plain files", p, ConfigMapsDir, SecretsDir)
		case fi.Mode().IsRegular():
			var data []byte
			if data, err = f.ReadFile(p); err == nil {
				err = c.AddConfigMapKey(DefaultConfigMap, name, data)
			}
		default:
			err = fmt.Errorf("%s is not a regular file", p)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// loadObjects reads <dir>/<name>/<key> files and hands each to add.
func (s *LocalSource) loadObjects(f revisions.FS, dir string, add func(name, key string, data []byte) error) error {
	objs, err := f.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, o := range objs {
		op := filepath.Join(dir, o.Name())
		if s.skip(op) {
			continue
		}
		if fi, err := f.Stat(op); err != nil {
			return fmt.Errorf("read %s: %w", op, err)
		} else if !fi.IsDir() {
			return fmt.Errorf("%s is not a folder: want %s/<name>/<key>", op, filepath.Base(dir))
		}
		keys, err := f.ReadDir(op)
		if err != nil {
			return fmt.Errorf("read %s: %w", op, err)
		}
		for _, k := range keys {
			kp := filepath.Join(op, k.Name())
			if s.skip(kp) {
				continue
			}
			fi, err := f.Stat(kp)
			if err != nil {
				return fmt.Errorf("read %s: %w", kp, err)
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("%s is not a regular file: keys cannot be folders", kp)
			}
			data, err := f.ReadFile(kp)
			if err != nil {
				return fmt.Errorf("read %s: %w", kp, err)
			}
			if err := add(o.Name(), k.Name(), data); err != nil {
				return err
			}
		}
	}
	return nil
}
