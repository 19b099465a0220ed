package cmdline

import (
	"time"

	"github.com/spf13/pflag"
)

// defaultLockTimeout is revisions.DefaultLockTimeout (a test of cmd/revgate
// checks it).
const defaultLockTimeout = 2 * time.Minute

// Render are the flags saying what the rendered pods run; `revgate install`
// and `revgate controller` take them alike. Their defaults are those of
// the installer (a test of cmd/revgate checks them), which also checks
// their values.
type Render struct {
	// Binary is --binary; default empty (this executable).
	Binary string
	// Image is --image; default "revgate:latest".
	Image string
	// ImagePullPolicy is --image-pull-policy; default IfNotPresent.
	ImagePullPolicy string
	// ProxyArgs are --proxy-arg values, appended to the proxy's command.
	ProxyArgs []string
	// MonitorArgs are --monitor-arg values, appended to the monitor's command.
	MonitorArgs []string
	// MonitorKubeconfig is --monitor-kubeconfig; default empty.
	MonitorKubeconfig string
	// Publish is --publish: slots (the default) or replace.
	Publish string
	// EndpointsFile is --endpoints-file, the live endpoints file the proxy
	// follows; default empty.
	EndpointsFile string
}

// AddFlags registers --binary, --image, --image-pull-policy, --proxy-arg,
// --monitor-arg, --monitor-kubeconfig, --publish and --endpoints-file.
func (r *Render) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&r.Binary, "binary", "", "revgate binary put into the rendered pods' commands (default: this executable)")
	fs.StringVar(&r.Image, "image", "revgate:latest", "container image of the rendered pods")
	fs.Var(newStringValue(&r.ImagePullPolicy, "IfNotPresent", "policy"), "image-pull-policy", "image pull policy of the rendered pods: Always, IfNotPresent or Never")
	fs.StringArrayVar(&r.ProxyArgs, "proxy-arg", nil, "extra argument appended to the rendered proxy command (repeatable)")
	fs.StringArrayVar(&r.MonitorArgs, "monitor-arg", nil, "extra argument appended to the rendered monitor command (repeatable)")
	fs.StringVar(&r.MonitorKubeconfig, "monitor-kubeconfig", "", "kubeconfig file on the node for the startup monitor (mirror-pod check, Events); mounted read-only into its pod")
	fs.Var(newStringValue(&r.Publish, "slots", "mode"), "publish", "how the operand pod is published: slots (a second static pod beside the serving one, which is removed once the new one is good) or replace (over the one manifest <target>-pod.yaml; the kubelet stops the old pod before starting the new one)")
	fs.StringVar(&r.EndpointsFile, "endpoints-file", "", "live endpoints file the proxy follows (--endpoints-file; conventionally <resource-dir>/<target>-live/endpoints.json); its folder is mounted read-only into the proxy pod (empty: the revision's endpoints only)")
}

// InstallCommand is the subcommand that installs a revision.
const InstallCommand = "install"

// Install is the command line of `revgate install`.
type Install struct {
	// SourceDir is --source-dir, a local configuration folder.
	SourceDir string
	// Layout are the layout flags, --lock-file and --termination-log included.
	Layout Layout
	// Revision is --revision; default 0 (the highest installed + 1).
	Revision int
	// Kubeconfig is --kubeconfig; default empty.
	Kubeconfig string
	// NodeName is --node-name; default DefaultNodeName().
	NodeName string
	// Namespace is --namespace of the ConfigMaps and Secrets read.
	Namespace string
	// ConfigMaps, Secrets, OptionalConfigMaps and OptionalSecrets are
	// --configmaps, --secrets, --optional-configmaps and --optional-secrets.
	ConfigMaps, Secrets, OptionalConfigMaps, OptionalSecrets []string
	// RevisionedNames is --revisioned-names; default false.
	RevisionedNames bool
	// RetryTimeout is --retry-timeout; default 1m.
	RetryTimeout time.Duration
	// Render are the flags of the rendered pods.
	Render Render
	// LockTimeout is --lock-timeout; default 2m.
	LockTimeout time.Duration
	// Strict is --strict; default false.
	Strict bool
	// NoPublish is --no-publish; default false.
	NoPublish bool
}

// installFlagAliases are library-go installer flags spelled differently from
// revgate's with the same meaning. Its other flags either have revgate's
// spelling already (--kubeconfig, --revision, --namespace, --configmaps,
// --secrets, --optional-configmaps, --optional-secrets, --resource-dir) or
// mean something revgate does not do (--pod reads the pod from a ConfigMap,
// revgate renders it; --timeout-duration bounds the whole install; --cert-dir
// and --cert-* copy certificates outside revisions).
var installFlagAliases = map[string]string{
	"pod-manifest-dir":        "manifests-dir",
	"pod-manifests-lock-file": "lock-file",
}

// AddFlags registers every flag of `revgate install`, and library-go's
// spellings of some of them.
func (in *Install) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&in.SourceDir, "source-dir", "", "local configuration folder: configmaps/<name>/<key>, secrets/<name>/<key>; plain files become keys of the ConfigMap \"config\"")
	in.Layout.AddFlags(fs, WithLock|WithTerminationLog)
	fs.IntVar(&in.Revision, "revision", 0, "revision to install (default: highest installed + 1)")

	fs.StringVar(&in.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to read ConfigMaps and Secrets from and record Events in")
	fs.StringVar(&in.NodeName, "node-name", DefaultNodeName(), "node name; Events are recorded on the mirror pod <target>-<node name> (default $NODE_NAME, else the host name)")
	fs.StringVar(&in.Namespace, "namespace", "", "namespace of the ConfigMaps and Secrets")
	fs.StringSliceVar(&in.ConfigMaps, "configmaps", nil, "ConfigMaps to install (comma-separated, repeatable)")
	fs.StringSliceVar(&in.Secrets, "secrets", nil, "Secrets to install (comma-separated, repeatable)")
	fs.StringSliceVar(&in.OptionalConfigMaps, "optional-configmaps", nil, "ConfigMaps to install when they exist")
	fs.StringSliceVar(&in.OptionalSecrets, "optional-secrets", nil, "Secrets to install when they exist")
	fs.BoolVar(&in.RevisionedNames, "revisioned-names", false, "read every ConfigMap and Secret named <name> as <name>-<revision>, the copies OpenShift's revision controller makes, and install it as <name> (needs --revision)")
	fs.DurationVar(&in.RetryTimeout, "retry-timeout", time.Minute, "how long to retry a Kubernetes read failing with a connection error, 5xx or 429")

	in.Render.AddFlags(fs)
	fs.DurationVar(&in.LockTimeout, "lock-timeout", defaultLockTimeout, "how long to wait for the lock")
	fs.BoolVar(&in.Strict, "strict", false, "refuse the configuration on validation warnings too")
	fs.BoolVar(&in.NoPublish, "no-publish", false, "write the revision but do not publish its manifests")
	addFlagAliases(fs, installFlagAliases)
}

// NewInstall returns the install command line with every flag at its default.
func NewInstall() Install { return defaults[Install]() }

// Args renders the flags of in that differ from their defaults, in a
// stable order.
func (in Install) Args() []string {
	return render(in)
}
