// Package revisions is revgate's on-disk contract: where revisions, manifests,
// the lock, the last-known-good link, the retry state and the termination log
// live, and how each of them is written so that a crash at any point leaves
// either the old state or the complete new one.
//
// The layout is compatible with OpenShift's static-pod layout:
//
//	<resource-dir>/<t>-pod-<N>/<t>-pod.yaml                  operand manifest of revision N
//	<resource-dir>/<t>-pod-<N>/<t>-startup-monitor-pod.yaml  monitor manifest of revision N
//	<resource-dir>/<t>-pod-<N>/configmaps/<name>/<key>
//	<resource-dir>/<t>-pod-<N>/secrets/<name>/<key>          (0600)
//	<resource-dir>/<t>-last-known-good                       symlink → <t>-pod-<N>/<t>-pod.yaml
//	<resource-dir>/<t>-state.json                            retry state
//	<resource-dir>/<t>-live/endpoints.json                   live endpoints (outside every revision)
//	<manifests-dir>/<t>-pod.yaml, <t>-startup-monitor-pod.yaml
//	/var/lock/<t>-installer.lock
//	/var/log/<t>/termination.log
package revisions

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Defaults of the on-disk contract.
const (
	// DefaultTarget is the default target name.
	DefaultTarget = "revgate"
	// DefaultResourceDir holds the revision folders.
	DefaultResourceDir = "/etc/kubernetes/static-pod-resources"
	// DefaultManifestsDir is the kubelet's staticPodPath.
	DefaultManifestsDir = "/etc/kubernetes/manifests"
	// RevisionLabel is the operand manifest's label carrying its revision.
	RevisionLabel = "revision"
)

// Layout says where every file of one target lives. The zero values of its
// fields are filled in by Defaulted.
type Layout struct {
	// Target is the target name <t>; default "revgate".
	Target string
	// ResourceDir holds revision folders; default /etc/kubernetes/static-pod-resources.
	ResourceDir string
	// ManifestsDir is where manifests are published; default /etc/kubernetes/manifests.
	ManifestsDir string
	// LockFile is the lock shared by installer, monitor and pruner; default
	// /var/lock/<t>-installer.lock.
	LockFile string
	// TerminationLog is the operand's termination log; default /var/log/<t>/termination.log.
	TerminationLog string
}

// Defaulted returns l with every empty field set to its default.
func (l Layout) Defaulted() Layout {
	if l.Target == "" {
		l.Target = DefaultTarget
	}
	if l.ResourceDir == "" {
		l.ResourceDir = DefaultResourceDir
	}
	if l.ManifestsDir == "" {
		l.ManifestsDir = DefaultManifestsDir
	}
	if l.LockFile == "" {
		l.LockFile = DefaultLockFile(l.Target)
	}
	if l.TerminationLog == "" {
		l.TerminationLog = DefaultTerminationLog(l.Target)
	}
	return l
}

// DefaultLockFile is /var/lock/<t>-installer.lock.
func DefaultLockFile(target string) string {
	return filepath.Join("/var/lock", target+"-installer.lock")
}

// DefaultTerminationLog is /var/log/<t>/termination.log.
func DefaultTerminationLog(target string) string {
	return filepath.Join("/var/log", target, "termination.log")
}

var targetRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate checks that the target is a DNS label and that the folders are set.
func (l Layout) Validate() error {
	if !targetRE.MatchString(l.Target) || len(l.Target) > 50 {
		return fmt.Errorf("invalid target %q: want a lower-case DNS label of at most 50 characters", l.Target)
	}
	for name, v := range map[string]string{"resource dir": l.ResourceDir, "manifests dir": l.ManifestsDir, "lock file": l.LockFile} {
		if v == "" {
			return fmt.Errorf("%s is empty", name)
		}
	}
	return nil
}

// PodManifestName is <t>-pod.yaml.
func (l Layout) PodManifestName() string { return l.Target + "-pod.yaml" }

// MonitorManifestName is <t>-startup-monitor-pod.yaml.
func (l Layout) MonitorManifestName() string { return l.Target + "-startup-monitor-pod.yaml" }

// RevisionDirName is <t>-pod-<n>.
func (l Layout) RevisionDirName(n int) string { return l.Target + "-pod-" + strconv.Itoa(n) }

// RevisionDir is <resource-dir>/<t>-pod-<n>.
func (l Layout) RevisionDir(n int) string {
	return filepath.Join(l.ResourceDir, l.RevisionDirName(n))
}

// RevisionPodManifest is the operand manifest of revision n.
func (l Layout) RevisionPodManifest(n int) string {
	return filepath.Join(l.RevisionDir(n), l.PodManifestName())
}

// RevisionMonitorManifest is the startup-monitor manifest of revision n.
func (l Layout) RevisionMonitorManifest(n int) string {
	return filepath.Join(l.RevisionDir(n), l.MonitorManifestName())
}

// LastKnownGoodLink is <resource-dir>/<t>-last-known-good.
func (l Layout) LastKnownGoodLink() string {
	return filepath.Join(l.ResourceDir, l.Target+"-last-known-good")
}

// StateFile is <resource-dir>/<t>-state.json.
func (l Layout) StateFile() string {
	return filepath.Join(l.ResourceDir, l.Target+"-state.json")
}

// LiveDir is <resource-dir>/<t>-live, the folder of data that reaches the
// running gateway without a revision (live endpoints). It is a folder, not a
// file, because writers replace files by rename and a kubelet hostPath mount
// of a single file keeps the old inode after a rename; a mounted folder sees
// the new file.
func (l Layout) LiveDir() string {
	return filepath.Join(l.ResourceDir, l.Target+"-live")
}

// EndpointsFileName is the live endpoints file's name inside LiveDir.
const EndpointsFileName = "endpoints.json"

// EndpointsFile is <resource-dir>/<t>-live/endpoints.json, the default live
// endpoints file that the controller writes and `revgate proxy
// --endpoints-file` watches.
func (l Layout) EndpointsFile() string {
	return filepath.Join(l.LiveDir(), EndpointsFileName)
}

// PublishedPodManifest is <manifests-dir>/<t>-pod.yaml.
func (l Layout) PublishedPodManifest() string {
	return filepath.Join(l.ManifestsDir, l.PodManifestName())
}

// PublishedMonitorManifest is <manifests-dir>/<t>-startup-monitor-pod.yaml.
func (l Layout) PublishedMonitorManifest() string {
	return filepath.Join(l.ManifestsDir, l.MonitorManifestName())
}

// ParseRevisionDirName parses "<t>-pod-<n>" for this layout's target. It
// returns false for any other name, including staging folders (dotfiles).
func (l Layout) ParseRevisionDirName(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, l.Target+"-pod-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// LayoutFromRevisionDir recognises a revision folder path
// <resource-dir>/<t>-pod-<N> and returns its layout (Target and ResourceDir
// set) and N. It returns false when the folder's name is not of that form.
func LayoutFromRevisionDir(dir string) (Layout, int, bool) {
	dir = filepath.Clean(dir)
	base := filepath.Base(dir)
	i := strings.LastIndex(base, "-pod-")
	if i <= 0 {
		return Layout{}, 0, false
	}
	l := Layout{Target: base[:i], ResourceDir: filepath.Dir(dir)}
	n, ok := l.ParseRevisionDirName(base)
	if !ok {
		return Layout{}, 0, false
	}
	return l, n, true
}

// Absolute returns l with every path made absolute against the working
// folder, as paths rendered into pod manifests must be: the pods do not run
// in the installer's working folder.
func (l Layout) Absolute() (Layout, error) {
	for _, p := range []*string{&l.ResourceDir, &l.ManifestsDir, &l.LockFile, &l.TerminationLog} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return l, fmt.Errorf("make %q absolute: %w", *p, err)
		}
		*p = abs
	}
	return l, nil
}
