package revisions

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Sentinel errors for expected states.
var (
	// ErrNoLastKnownGood: the last-known-good link does not exist.
	ErrNoLastKnownGood = errors.New("no last-known-good revision")
	// ErrNoManifest: a manifest file does not exist.
	ErrNoManifest = errors.New("manifest not found")
	// ErrNoInstallTime: a manifest has no usable revgate.io/installed-at.
	ErrNoInstallTime = errors.New("no install time annotation")
	// ErrNoRevisionLabel: a manifest has no usable revision label.
	ErrNoRevisionLabel = errors.New("manifest has no revision label")
)

// Listing is the content of the resource dir for one target.
type Listing struct {
	// Revisions are the revision numbers found, ascending.
	Revisions []int
	// Ignored are entries that look like ours (<t>-pod-*) but do not parse.
	Ignored []string
}

// Highest returns the highest revision, 0 when there is none.
func (l Listing) Highest() int {
	if len(l.Revisions) == 0 {
		return 0
	}
	return l.Revisions[len(l.Revisions)-1]
}

// Has reports whether revision n exists.
func (l Listing) Has(n int) bool {
	i := sort.SearchInts(l.Revisions, n)
	return i < len(l.Revisions) && l.Revisions[i] == n
}

// List lists the revision folders of the layout's target. A missing resource
// dir is an empty listing.
func (l Layout) List(f FS) (Listing, error) {
	entries, err := f.ReadDir(l.ResourceDir)
	if errors.Is(err, fs.ErrNotExist) {
		return Listing{}, nil
	}
	if err != nil {
		return Listing{}, fmt.Errorf("list revisions in %s: %w", l.ResourceDir, err)
	}
	var out Listing
	prefix := l.Target + "-pod-"
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		n, ok := l.ParseRevisionDirName(name)
		if !ok || !e.IsDir() {
			out.Ignored = append(out.Ignored, name)
			continue
		}
		out.Revisions = append(out.Revisions, n)
	}
	sort.Ints(out.Revisions)
	return out, nil
}

// manifestMeta is the part of a pod manifest this package reads.
type manifestMeta struct {
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// ReadRevisionLabel reads metadata.labels.revision of the pod manifest at path.
func ReadRevisionLabel(f FS, path string) (int, error) {
	data, err := f.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s: %w", path, ErrNoManifest)
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return RevisionLabelOf(data, path)
}

// RevisionLabelOf reads metadata.labels.revision from manifest bytes; name is
// used in errors.
func RevisionLabelOf(data []byte, name string) (int, error) {
	var m manifestMeta
	if err := yaml.Unmarshal(data, &m); err != nil {
		return 0, fmt.Errorf("parse %s: %w", name, err)
	}
	v, ok := m.Metadata.Labels[RevisionLabel]
	if !ok {
		return 0, fmt.Errorf("%s: %w", name, ErrNoRevisionLabel)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: revision label %q: %w", name, v, ErrNoRevisionLabel)
	}
	return n, nil
}

// InstalledAtOf reads the AnnotationInstalledAt time from manifest bytes;
// name is used in errors.
func InstalledAtOf(data []byte, name string) (time.Time, error) {
	var m manifestMeta
	if err := yaml.Unmarshal(data, &m); err != nil {
		return time.Time{}, fmt.Errorf("parse %s: %w", name, err)
	}
	t, err := time.Parse(time.RFC3339, m.Metadata.Annotations[AnnotationInstalledAt])
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", name, ErrNoInstallTime)
	}
	return t, nil
}

// LastKnownGood returns the revision the last-known-good link points at. It
// returns ErrNoLastKnownGood when the link does not exist, and an error when
// it points somewhere that is not a manifest of this target.
func (l Layout) LastKnownGood(f FS) (int, error) {
	link := l.LastKnownGoodLink()
	target, err := f.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, ErrNoLastKnownGood
	}
	if err != nil {
		return 0, fmt.Errorf("read link %s: %w", link, err)
	}
	if filepath.IsAbs(target) {
		rel, err := filepath.Rel(l.ResourceDir, target)
		if err != nil {
			return 0, fmt.Errorf("link %s points outside %s: %q", link, l.ResourceDir, target)
		}
		target = rel
	}
	dir, file := filepath.Split(filepath.Clean(target))
	n, ok := l.ParseRevisionDirName(strings.TrimSuffix(dir, "/"))
	if !ok || file != l.PodManifestName() {
		return 0, fmt.Errorf("link %s points at %q, not at a %s of this target", link, target, l.PodManifestName())
	}
	if _, err := f.Stat(l.RevisionPodManifest(n)); err != nil {
		return 0, fmt.Errorf("last-known-good revision %d: %w", n, err)
	}
	return n, nil
}

// LastKnownGoodDir returns the folder of the last-known-good revision.
func (l Layout) LastKnownGoodDir(f FS) (string, int, error) {
	n, err := l.LastKnownGood(f)
	if err != nil {
		return "", 0, err
	}
	return l.RevisionDir(n), n, nil
}

// SetLastKnownGood points the last-known-good link at revision n, atomically,
// with a relative target so the resource dir can be moved. The revision's
// operand manifest must exist.
func (l Layout) SetLastKnownGood(f FS, n int) error {
	if _, err := f.Stat(l.RevisionPodManifest(n)); err != nil {
		return fmt.Errorf("set last-known-good to revision %d: %w", n, err)
	}
	target := filepath.Join(l.RevisionDirName(n), l.PodManifestName())
	return f.ReplaceSymlink(l.LastKnownGoodLink(), target)
}

// PublishedRevision returns the revision label of the operand manifest
// currently published in the manifests dir.
func (l Layout) PublishedRevision(f FS) (int, error) {
	return ReadRevisionLabel(f, l.PublishedPodManifest())
}
