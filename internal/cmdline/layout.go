package cmdline

import "github.com/spf13/pflag"

// Defaults of the layout flags; revisions.Layout has the same (a test of
// cmd/revgate checks it).
const (
	defaultTarget       = "revgate"
	defaultResourceDir  = "/etc/kubernetes/static-pod-resources"
	defaultManifestsDir = "/etc/kubernetes/manifests"
)

// Layout are the flags naming the on-disk contract of a target. Its fields
// are those of revisions.Layout, in the same order, so that either converts
// to the other; empty values are defaulted by revisions.Layout.Defaulted.
type Layout struct {
	// Target is --target; default "revgate".
	Target string
	// ResourceDir is --resource-dir; default /etc/kubernetes/static-pod-resources.
	ResourceDir string
	// ManifestsDir is --manifests-dir; default /etc/kubernetes/manifests.
	ManifestsDir string
	// LockFile is --lock-file; default empty (/var/lock/<target>-installer.lock).
	LockFile string
	// TerminationLog is --termination-log; default empty
	// (/var/log/<target>/termination.log).
	TerminationLog string
}

// LayoutFlags say which optional layout flags a command takes.
type LayoutFlags uint8

// The optional layout flags.
const (
	// WithLock registers --lock-file.
	WithLock LayoutFlags = 1 << iota
	// WithTerminationLog registers --termination-log.
	WithTerminationLog
)

// AddFlags registers --target, --resource-dir, --manifests-dir and, as
// asked, --lock-file and --termination-log, with the same names, defaults
// and help in every command.
func (l *Layout) AddFlags(fs *pflag.FlagSet, with LayoutFlags) {
	fs.StringVar(&l.Target, "target", defaultTarget, "target name")
	fs.StringVar(&l.ResourceDir, "resource-dir", defaultResourceDir, "folder holding the revision folders")
	fs.StringVar(&l.ManifestsDir, "manifests-dir", defaultManifestsDir, "folder the manifests are published into (the kubelet's staticPodPath)")
	if with&WithLock != 0 {
		fs.StringVar(&l.LockFile, "lock-file", "", "lock shared by installer, monitor and pruner (default /var/lock/<target>-installer.lock)")
	}
	if with&WithTerminationLog != 0 {
		fs.StringVar(&l.TerminationLog, "termination-log", "", "the operand's termination log (default /var/log/<target>/termination.log)")
	}
}
