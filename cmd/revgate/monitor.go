package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/monitor"
	"github.com/revgate/revgate/revisions"
)

// monitorOptions are the flags of `revgate monitor`.
type monitorOptions struct {
	revision           int
	layout             revisions.Layout
	healthzURL         string
	readyzURL          string
	fallbackTimeout    time.Duration
	probeInterval      time.Duration
	readySuccesses     int
	crashloopThreshold int
	retryInitial       time.Duration
	retryMax           time.Duration
	kubeconfig         string
	nodeName           string
	namespace          string
	lockTimeout        time.Duration
}

func init() {
	o := &monitorOptions{}
	cmd := &cobra.Command{
		Use:   "monitor --revision N",
		Short: "Watch a newly published revision; make it last-known-good or fall back",
		Long: `monitor watches revision N after the installer published it: its start records
in the termination log, /healthz, /readyz?verbose and, with --kubeconfig, its
mirror pod. When the revision is started, healthy and ready it becomes the
last-known-good revision and the monitor removes its own manifest and exits.
When it never starts, crash-loops, is unhealthy or never ready within
--fallback-timeout, the last-known-good revision is published again with
fallback annotations; Unhealthy, NotReady and DependencyUnhealthy revisions
are rolled out again after an exponential backoff.

OpenShift's startup-monitor spellings --fallback-timeout-duration,
--target-name and --installer-lock-file are accepted for --fallback-timeout,
--target and --lock-file; --node-name defaults to $NODE_NAME.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context())
		},
	}
	o.addFlags(cmd.Flags())
	rootCmd.AddCommand(cmd)
}

func (o *monitorOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.revision, "revision", 0, "revision to watch (required)")
	addLayoutFlags(fs, &o.layout, withLock|withTerminationLog)
	fs.StringVar(&o.healthzURL, "healthz-url", monitor.DefaultHealthzURL, "operand's healthz endpoint")
	fs.StringVar(&o.readyzURL, "readyz-url", monitor.DefaultReadyzURL, "operand's readyz endpoint (asked with ?verbose)")
	fs.DurationVar(&o.fallbackTimeout, "fallback-timeout", monitor.DefaultFallbackTimeout, "time from seeing the revision published to falling back")
	fs.DurationVar(&o.probeInterval, "probe-interval", monitor.DefaultProbeInterval, "interval between checks")
	fs.IntVar(&o.readySuccesses, "ready-successes", monitor.DefaultReadySuccesses, "passes in a row that make the revision good")
	fs.IntVar(&o.crashloopThreshold, "crashloop-threshold", monitor.DefaultCrashloopThreshold, "starts in one rollout that decide CrashLooping at once")
	fs.DurationVar(&o.retryInitial, "retry-initial", monitor.DefaultRetryInitial, "first wait before a failed revision is rolled out again")
	fs.DurationVar(&o.retryMax, "retry-max", monitor.DefaultRetryMax, "longest wait between retries")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig: check the mirror pod and record Events on it")
	fs.StringVar(&o.nodeName, "node-name", defaultNodeName(), "node name; the mirror pod is <pod name>-<node name> (default $NODE_NAME, else the host name)")
	fs.StringVar(&o.namespace, "namespace", "kube-system", "namespace of the mirror pod")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", revisions.DefaultLockTimeout, "longest wait for the lock")
	addFlagAliases(fs, monitorFlagAliases)
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

func (o *monitorOptions) validate() error {
	if o.revision <= 0 {
		return errors.New("--revision is required and must be positive")
	}
	if o.kubeconfig != "" && o.nodeName == "" {
		return errors.New("--node-name is required with --kubeconfig")
	}
	for name, d := range map[string]time.Duration{"--fallback-timeout": o.fallbackTimeout, "--probe-interval": o.probeInterval,
		"--retry-initial": o.retryInitial, "--retry-max": o.retryMax, "--lock-timeout": o.lockTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	if o.readySuccesses < 1 {
		return fmt.Errorf("--ready-successes must be at least 1, got %d", o.readySuccesses)
	}
	if o.crashloopThreshold < 2 {
		return fmt.Errorf("--crashloop-threshold must be at least 2, got %d", o.crashloopThreshold)
	}
	o.layout = o.layout.Defaulted()
	return o.layout.Validate()
}

func (o *monitorOptions) run(ctx context.Context) error {
	log := logging.New(nil, slog.LevelInfo)
	opts := monitor.Options{
		Revision:           o.revision,
		Layout:             o.layout,
		HealthzURL:         o.healthzURL,
		ReadyzURL:          o.readyzURL,
		FallbackTimeout:    o.fallbackTimeout,
		ProbeInterval:      o.probeInterval,
		ReadySuccesses:     o.readySuccesses,
		CrashloopThreshold: o.crashloopThreshold,
		RetryInitial:       o.retryInitial,
		RetryMax:           o.retryMax,
		LockTimeout:        o.lockTimeout,
		Logger:             log,
	}
	if o.kubeconfig != "" {
		name, err := monitor.MirrorPodName(revisions.OS(), o.layout, o.revision, o.nodeName)
		if err != nil {
			return err
		}
		client, err := monitorKubeClient(o.kubeconfig)
		if err != nil {
			return err
		}
		mp := &monitor.MirrorPod{Client: client, Namespace: o.namespace, Name: name, Node: o.nodeName}
		opts.Pods, opts.Events = mp, mp
	}
	m, err := monitor.New(opts)
	if err != nil {
		return err
	}
	return m.Run(ctx)
}

// monitorKubeClient builds a clientset from a kubeconfig file.
func monitorKubeClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "revgate"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	return client, nil
}
