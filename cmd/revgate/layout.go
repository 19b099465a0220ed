package main

import (
	"github.com/spf13/pflag"

	"github.com/revgate/revgate/revisions"
)

// layoutFlags are the parts of the on-disk contract a command takes as flags.
type layoutFlags uint8

const (
	withLock layoutFlags = 1 << iota
	withTerminationLog
)

// addLayoutFlags registers --target, --resource-dir, --manifests-dir and, as
// asked, --lock-file and --termination-log, with the same names, defaults and
// help in every command; empty values are defaulted later by
// revisions.Layout.Defaulted.
func addLayoutFlags(fs *pflag.FlagSet, l *revisions.Layout, with layoutFlags) {
	fs.StringVar(&l.Target, "target", revisions.DefaultTarget, "target name")
	fs.StringVar(&l.ResourceDir, "resource-dir", revisions.DefaultResourceDir, "folder holding the revision folders")
	fs.StringVar(&l.ManifestsDir, "manifests-dir", revisions.DefaultManifestsDir, "folder the manifests are published into (the kubelet's staticPodPath)")
	if with&withLock != 0 {
		fs.StringVar(&l.LockFile, "lock-file", "", "lock shared by installer, monitor and pruner (default /var/lock/<target>-installer.lock)")
	}
	if with&withTerminationLog != 0 {
		fs.StringVar(&l.TerminationLog, "termination-log", "", "the operand's termination log (default /var/log/<target>/termination.log)")
	}
}
