package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/supervise"
)

// superviseOptions are the flags of `revgate supervise`.
type superviseOptions struct {
	opts      supervise.Options
	logTarget string
	logLevel  string
}

// AddFlags registers the flags; every default is supervise's.
func (o *superviseOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.opts.ManifestsDir, "manifests-dir", supervise.DefaultManifestsDir, "folder of static-pod manifests to run (*.yaml, *.yml, *.json; dotfiles are skipped)")
	fs.DurationVar(&o.opts.RelistPeriod, "relist-period", supervise.DefaultRelistPeriod, "how often the manifests dir is read even without file events")
	fs.DurationVar(&o.opts.RemoveDelay, "remove-delay", supervise.DefaultRemoveDelay, "how long a manifest must stay absent before its pod is stopped (remove-then-write is an update)")
	fs.DurationVar(&o.opts.ReadyWithoutProbeAfter, "ready-without-probe-after", supervise.DefaultReadyWithoutProbeAfter, "how long a container without readinessProbe must run before it counts as ready and replaces the old pod")
	fs.DurationVar(&o.opts.BackoffInitial, "backoff-initial", supervise.DefaultBackoffInitial, "first restart delay of an exited container; doubles on each restart")
	fs.DurationVar(&o.opts.BackoffMax, "backoff-max", supervise.DefaultBackoffMax, "longest restart delay")
	fs.DurationVar(&o.opts.BackoffReset, "backoff-reset", supervise.DefaultBackoffReset, "uptime after which the restart delay starts over at --backoff-initial")
	fs.StringVar(&o.opts.StatusFile, "status-file", "", "JSON file kept holding every pod's state (generations, pids, readiness, restarts), rewritten atomically on change; empty: none")
	fs.StringVar(&o.logTarget, "log-target", "auto", `where logs go: "journald" (upper-case fields POD=, CONTAINER=), "stderr", or "auto" (journald when stderr is connected to the journal)`)
	fs.StringVar(&o.logLevel, "log-level", "info", "minimum log level: debug, info, warn, error")
}

// validate checks the flags.
func (o *superviseOptions) validate() error {
	var errs []error
	if o.opts.ManifestsDir == "" {
		errs = append(errs, errors.New("--manifests-dir is empty"))
	}
	for name, d := range map[string]time.Duration{
		"--relist-period": o.opts.RelistPeriod, "--backoff-initial": o.opts.BackoffInitial,
		"--backoff-max": o.opts.BackoffMax, "--backoff-reset": o.opts.BackoffReset,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if o.opts.RemoveDelay < 0 || o.opts.ReadyWithoutProbeAfter < 0 {
		errs = append(errs, errors.New("--remove-delay and --ready-without-probe-after must not be negative"))
	}
	if o.opts.BackoffMax < o.opts.BackoffInitial {
		errs = append(errs, errors.New("--backoff-max is below --backoff-initial"))
	}
	switch o.logTarget {
	case "auto", "stderr", "journald":
	default:
		errs = append(errs, fmt.Errorf("--log-target %q is not auto, stderr or journald", o.logTarget))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	return errors.Join(errs...)
}

// logger returns the logger for the chosen target.
func (o *superviseOptions) logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(o.logLevel))
	l, err := logging.NewFor(o.logTarget, nil, lvl)
	if err != nil { // Validate has refused other targets
		return logging.New(nil, lvl)
	}
	return l
}

// run supervises until ctx is cancelled (SIGTERM, SIGINT), then stops every
// pod and returns nil. Under systemd (NOTIFY_SOCKET set) it speaks sd_notify:
// READY=1, STATUS=, WATCHDOG=1 at half of WatchdogSec, STOPPING=1.
func (o *superviseOptions) run(ctx context.Context, _ io.Writer) error {
	opts := o.opts
	opts.Logger = o.logger()
	slog.SetDefault(opts.Logger)
	n, watchdog, ok, err := supervise.Systemd()
	if err != nil {
		opts.Logger.Warn("systemd notification setup incomplete", "component", "supervise", "err", err)
	}
	if ok {
		opts.Notifier, opts.WatchdogInterval = n, watchdog
	}
	return supervise.New(opts).Run(ctx)
}

func newSuperviseCommand() *cobra.Command {
	o := &superviseOptions{}
	cmd := &cobra.Command{
		Use:   "supervise",
		Short: "Run static-pod manifests as host processes (where there is no kubelet)",
		Long: `Supervise watches a manifests dir and runs every pod in it as host processes:
each container's command and args with its env, in a process group of its own,
restarted per restartPolicy with a CrashLoopBackOff-like backoff. A pod is its
file name. A changed manifest starts the new pod beside the old one (operands
bind their ports with SO_REUSEPORT) and stops the old one once the new one's
readinessProbe passes; a manifest that does not parse starts nothing and
leaves a running pod as it is. SIGTERM stops every pod gracefully, then exits 0.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func init() { rootCmd.AddCommand(newSuperviseCommand()) }
