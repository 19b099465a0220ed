// Package installertest checks the on-disk invariants that installs and
// prunes must keep whatever happens to them (a fault, a kill): for tests of
// the installer, the pruner and the end-to-end crash tests.
package installertest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/revisions"
)

// Files maps a revision folder's configuration files (slash-separated paths
// relative to the folder, e.g. "secrets/tls/tls.key") to their content.
type Files map[string][]byte

// FilesOf lists the files a revision of cfg holds, besides its manifests.
func FilesOf(cfg *installer.Config) Files {
	out := Files{}
	for name, keys := range cfg.ConfigMaps {
		for k, v := range keys {
			out[path.Join(installer.ConfigMapsDir, name, k)] = v
		}
	}
	for name, keys := range cfg.Secrets {
		for k, v := range keys {
			out[path.Join(installer.SecretsDir, name, k)] = v
		}
	}
	return out
}

// Check verifies, for the target of l:
//   - every revision folder under its real name is complete: both manifests,
//     carrying its revision, and configuration files equal to one of the
//     candidates (entirely one, never a mix), secrets 0600;
//   - the published monitor manifest and operand manifests (in either slot),
//     when present, are byte-equal to the manifests of a complete revision,
//     an operand manifest published into a slot as the slot makes it;
//   - the last-known-good link, when present, resolves to a complete revision;
//   - the state file, when present, parses;
//   - nothing but dotfile temps lies beside them.
//
// It returns the highest published operand revision (0 when none).
func Check(l revisions.Layout, candidates ...Files) (int, error) {
	l = l.Defaulted()
	f := revisions.OS()
	listing, err := l.List(f)
	if err != nil {
		return 0, err
	}
	if len(listing.Ignored) > 0 {
		return 0, fmt.Errorf("unexpected entries in the resource dir: %v", listing.Ignored)
	}
	for _, n := range listing.Revisions {
		if err := checkRevision(l, n, candidates); err != nil {
			return 0, err
		}
	}
	entries, err := os.ReadDir(l.ResourceDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	for _, e := range entries {
		name := e.Name()
		if _, ok := l.ParseRevisionDirName(name); ok || revisions.IsTempName(name) ||
			name == filepath.Base(l.LastKnownGoodLink()) || name == filepath.Base(l.StateFile()) {
			continue
		}
		return 0, fmt.Errorf("unexpected file %s in the resource dir", name)
	}
	if _, err := os.Lstat(l.LastKnownGoodLink()); err == nil {
		n, err := l.LastKnownGood(f)
		if err != nil {
			return 0, fmt.Errorf("last-known-good: %w", err)
		}
		if !listing.Has(n) {
			return 0, fmt.Errorf("last-known-good revision %d is not listed", n)
		}
	}
	if _, err := revisions.LoadState(f, l.StateFile()); err != nil {
		return 0, err
	}
	data, err := os.ReadFile(l.PublishedMonitorManifest())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		if err := checkPublished(l, listing, data, l.PublishedMonitorManifest(), l.MonitorManifestName(), nil); err != nil {
			return 0, err
		}
	}
	slots, err := l.PublishedSlots(f)
	if err != nil {
		return 0, err
	}
	published := 0
	for _, s := range slots {
		var render func([]byte) ([]byte, error)
		if s.Labeled {
			render = func(rev []byte) ([]byte, error) { return l.SlotManifest(rev, s.Slot, s.UID) }
		}
		if err := checkPublished(l, listing, s.Data, s.Path, l.PodManifestName(), render); err != nil {
			return 0, err
		}
		if s.Labeled && s.UID == "" {
			return 0, fmt.Errorf("%s is published in slot %s without a metadata.uid", s.Path, s.Slot)
		}
		published = max(published, s.Revision)
	}
	mentries, err := os.ReadDir(l.ManifestsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	known := append(l.OperandManifestNames(), l.MonitorManifestName())
	for _, e := range mentries {
		if name := e.Name(); !slices.Contains(known, name) && !strings.HasPrefix(name, ".") {
			return 0, fmt.Errorf("non-dotfile %s in the manifests dir: the kubelet would parse it", name)
		}
	}
	return published, nil
}

// checkPublished checks that data, published at path, is the manifest
// called name of a complete revision: byte-equal to it, or to what render
// makes of it (a manifest published into a slot).
func checkPublished(l revisions.Layout, listing revisions.Listing, data []byte, path, name string, render func([]byte) ([]byte, error)) error {
	n, err := revisions.RevisionLabelOf(data, path)
	if err != nil {
		return fmt.Errorf("published manifest: %w", err)
	}
	if !listing.Has(n) {
		return fmt.Errorf("published %s is of revision %d, which is not installed", path, n)
	}
	want, err := os.ReadFile(filepath.Join(l.RevisionDir(n), name))
	if err != nil {
		return err
	}
	if render != nil {
		if want, err = render(want); err != nil {
			return fmt.Errorf("render revision %d's %s for %s: %w", n, name, path, err)
		}
	}
	if !bytes.Equal(data, want) {
		return fmt.Errorf("published %s differs from revision %d's %s", path, n, name)
	}
	return nil
}

func checkRevision(l revisions.Layout, n int, candidates []Files) error {
	dir := l.RevisionDir(n)
	got := Files{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, installer.SecretsDir+"/") {
			if fi, err := d.Info(); err != nil || fi.Mode().Perm() != 0o600 {
				return fmt.Errorf("revision %d: secret %s mode %v, want 0600", n, rel, fi.Mode().Perm())
			}
		}
		got[rel] = data
		return nil
	})
	if err != nil {
		return fmt.Errorf("revision %d: %w", n, err)
	}
	for _, name := range []string{l.PodManifestName(), l.MonitorManifestName()} {
		data, ok := got[name]
		if !ok {
			return fmt.Errorf("revision %d: %s missing", n, name)
		}
		if rev, err := revisions.RevisionLabelOf(data, name); err != nil || rev != n {
			return fmt.Errorf("revision %d: %s has revision %d: %v", n, name, rev, err)
		}
		delete(got, name)
	}
	if len(candidates) == 0 {
		return nil
	}
	for _, c := range candidates {
		if equal(got, c) {
			return nil
		}
	}
	return fmt.Errorf("revision %d: configuration files %v match none of the sources", n, keys(got))
}

func equal(a, b Files) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func keys(f Files) []string {
	out := make([]string, 0, len(f))
	for k := range f {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
