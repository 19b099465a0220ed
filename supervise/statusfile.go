package supervise

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// StatusFile is the JSON document written to Options.StatusFile.
type StatusFile struct {
	// PID is the supervisor's process id.
	PID int `json:"pid"`
	// ManifestsDir is the folder supervised.
	ManifestsDir string `json:"manifestsDir"`
	// Pods is the state of every pod, sorted by manifest file name.
	Pods []PodStatus `json:"pods"`
}

// writeStatusFile writes the status to Options.StatusFile when it changed.
func (s *Supervisor) writeStatusFile(pods []PodStatus) {
	if s.opts.StatusFile == "" {
		return
	}
	if pods == nil {
		pods = []PodStatus{}
	}
	data, err := json.MarshalIndent(StatusFile{PID: os.Getpid(), ManifestsDir: s.opts.ManifestsDir, Pods: pods}, "", "  ")
	if err != nil {
		s.log.Error("encoding the status failed", "err", err)
		return
	}
	data = append(data, '\n')
	if bytes.Equal(data, s.lastStatus) {
		return
	}
	if err := writeFileAtomic(s.opts.StatusFile, data); err != nil {
		s.log.Warn("writing the status file failed", "path", s.opts.StatusFile, "err", err)
		return
	}
	s.lastStatus = data
}

// writeFileAtomic replaces path with data: a dotfile in the same folder,
// fsync, rename, fsync of the folder. Readers see the old or the new file.
func writeFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
