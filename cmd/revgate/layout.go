package main

import (
	"os"

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

// addFlagAliases makes fs accept other spellings of some of its flags: each
// alias parses as the flag it names, with the same meaning, and stays out of
// --help (the README lists them). Commands use it for the spellings of
// OpenShift's library-go installer and startup monitor, so that an operator's
// existing command lines work unchanged.
func addFlagAliases(fs *pflag.FlagSet, aliases map[string]string) {
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if canonical, ok := aliases[name]; ok {
			name = canonical
		}
		return prev(f, name)
	})
}

// defaultNodeName is the default of --node-name: $NODE_NAME, which
// library-go's installer pod is given through the downward API, else the
// host name.
func defaultNodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	host, _ := os.Hostname()
	return host
}
