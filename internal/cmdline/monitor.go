package cmdline

import (
	"time"

	"github.com/spf13/pflag"
)

// MonitorCommand is the subcommand of the startup monitor.
const MonitorCommand = "monitor"

// monitorLayout are the layout flags of the monitor.
const monitorLayout = WithLock | WithTerminationLog

// Monitor is the command line of `revgate monitor`. The defaults of its
// URLs, timings and thresholds are those of the monitor package (a test of
// cmd/revgate checks them).
type Monitor struct {
	// Revision is --revision, the revision watched (required); default 0.
	Revision int
	// Layout are the layout flags, --lock-file and --termination-log included.
	Layout Layout
	// HealthzURL is --healthz-url; default http://127.0.0.1:9901/healthz.
	HealthzURL string
	// ReadyzURL is --readyz-url; default http://127.0.0.1:9901/readyz.
	ReadyzURL string
	// FallbackTimeout is --fallback-timeout; default 5m.
	FallbackTimeout time.Duration
	// ProbeInterval is --probe-interval; default 1s.
	ProbeInterval time.Duration
	// ReadySuccesses is --ready-successes; default 3.
	ReadySuccesses int
	// CrashloopThreshold is --crashloop-threshold; default 3.
	CrashloopThreshold int
	// RetryInitial is --retry-initial; default 10m.
	RetryInitial time.Duration
	// RetryMax is --retry-max; default 6h.
	RetryMax time.Duration
	// Kubeconfig is --kubeconfig; default empty (no mirror-pod check, no Events).
	Kubeconfig string
	// NodeName is --node-name; default DefaultNodeName().
	NodeName string
	// Namespace is --namespace of the mirror pod; default kube-system.
	Namespace string
	// LockTimeout is --lock-timeout; default 2m.
	LockTimeout time.Duration
	// Publish is --publish, how the installer published the revision:
	// replace (the default) or slots.
	Publish string
}

// monitorFlagAliases are library-go startup-monitor flags spelled
// differently from revgate's with the same meaning. --kubeconfig, --revision,
// --resource-dir, --manifests-dir and --node-name are spelled alike;
// --log-file-path has no counterpart (revgate logs to stderr or journald).
var monitorFlagAliases = map[string]string{
	"fallback-timeout-duration": "fallback-timeout",
	"target-name":               "target",
	"installer-lock-file":       "lock-file",
}

// AddFlags registers every flag of `revgate monitor`, and library-go's
// spellings of some of them.
func (m *Monitor) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&m.Revision, "revision", 0, "revision to watch (required)")
	m.Layout.AddFlags(fs, monitorLayout)
	fs.StringVar(&m.HealthzURL, "healthz-url", "http://127.0.0.1:9901/healthz", "operand's healthz endpoint")
	fs.StringVar(&m.ReadyzURL, "readyz-url", "http://127.0.0.1:9901/readyz", "operand's readyz endpoint (asked with ?verbose)")
	fs.DurationVar(&m.FallbackTimeout, "fallback-timeout", 5*time.Minute, "time from seeing the revision published to falling back")
	fs.DurationVar(&m.ProbeInterval, "probe-interval", time.Second, "interval between checks")
	fs.IntVar(&m.ReadySuccesses, "ready-successes", 3, "passes in a row that make the revision good")
	fs.IntVar(&m.CrashloopThreshold, "crashloop-threshold", 3, "starts in one rollout that decide CrashLooping at once")
	fs.DurationVar(&m.RetryInitial, "retry-initial", 10*time.Minute, "first wait before a failed revision is rolled out again")
	fs.DurationVar(&m.RetryMax, "retry-max", 6*time.Hour, "longest wait between retries")
	fs.StringVar(&m.Kubeconfig, "kubeconfig", "", "kubeconfig: check the mirror pod and record Events on it")
	fs.StringVar(&m.NodeName, "node-name", DefaultNodeName(), "node name; the mirror pod is <pod name>-<node name> (default $NODE_NAME, else the host name)")
	fs.StringVar(&m.Namespace, "namespace", "kube-system", "namespace of the mirror pod")
	fs.DurationVar(&m.LockTimeout, "lock-timeout", defaultLockTimeout, "longest wait for the lock")
	fs.StringVar(&m.Publish, "publish", "replace", "how the installer published the revision: slots (beside the serving revision) or replace (over the one operand manifest); the installer renders it")
	addFlagAliases(fs, monitorFlagAliases)
}

// NewMonitor returns the monitor's command line with every flag at its default.
func NewMonitor() Monitor { return defaults[Monitor]() }

// Args renders m as the arguments of a monitor pod: the layout flags always
// (the paths it works on never rest on a default), every other flag when
// it differs from its default; in a stable order, the revision first.
func (m Monitor) Args() []string {
	return render(m, flagNames(func(fs *pflag.FlagSet) { new(Layout).AddFlags(fs, monitorLayout) })...)
}

// Overrides renders just the flags of m that differ from their defaults:
// arguments to append to another monitor command line (--monitor-arg).
func (m Monitor) Overrides() []string {
	return render(m)
}

// ParseMonitor parses args as `revgate monitor` does.
func ParseMonitor(args []string) (Monitor, error) {
	return parse[Monitor](args)
}
