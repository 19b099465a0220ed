package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/monitor"
	"github.com/revgate/revgate/revisions"
)

// monitorOptions are the flags of `revgate monitor`; validate completes
// layout from them.
type monitorOptions struct {
	cmdline.Monitor
	layout revisions.Layout
}

// newMonitorCommand is `revgate monitor`, parsing its flags into o.
func newMonitorCommand(o *monitorOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   cmdline.MonitorCommand + " --revision N",
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
		RunE: runE(o),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func init() { rootCmd.AddCommand(newMonitorCommand(&monitorOptions{})) }

func (o *monitorOptions) validate() error {
	if o.Revision <= 0 {
		return errors.New("--revision is required and must be positive")
	}
	if o.Kubeconfig != "" && o.NodeName == "" {
		return errors.New("--node-name is required with --kubeconfig")
	}
	for name, d := range map[string]time.Duration{"--fallback-timeout": o.FallbackTimeout, "--probe-interval": o.ProbeInterval,
		"--retry-initial": o.RetryInitial, "--retry-max": o.RetryMax, "--lock-timeout": o.LockTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	if o.ReadySuccesses < 1 {
		return fmt.Errorf("--ready-successes must be at least 1, got %d", o.ReadySuccesses)
	}
	if o.CrashloopThreshold < 2 {
		return fmt.Errorf("--crashloop-threshold must be at least 2, got %d", o.CrashloopThreshold)
	}
	if _, err := revisions.ParsePublishMode(o.Publish); err != nil {
		return fmt.Errorf("--publish: %w", err)
	}
	o.layout = revisions.Layout(o.Layout).Defaulted()
	return o.layout.Validate()
}

func (o *monitorOptions) run(ctx context.Context, _ io.Writer) error {
	log := logging.New(nil, slog.LevelInfo)
	opts := monitor.Options{
		Revision:           o.Revision,
		Layout:             o.layout,
		HealthzURL:         o.HealthzURL,
		ReadyzURL:          o.ReadyzURL,
		FallbackTimeout:    o.FallbackTimeout,
		ProbeInterval:      o.ProbeInterval,
		ReadySuccesses:     o.ReadySuccesses,
		CrashloopThreshold: o.CrashloopThreshold,
		RetryInitial:       o.RetryInitial,
		RetryMax:           o.RetryMax,
		LockTimeout:        o.LockTimeout,
		Logger:             log,
		Publish:            revisions.PublishMode(o.Publish),
	}
	if o.Kubeconfig != "" {
		client, err := monitorKubeClient(o.Kubeconfig)
		if err != nil {
			return err
		}
		if opts.Publish == revisions.PublishSlots {
			// The operand's mirror pod is named after the slot it runs in.
			opts.Mirrors = &monitor.NodeMirrorPods{Client: client, Namespace: o.Namespace, Node: o.NodeName}
		} else {
			name, err := monitor.MirrorPodName(revisions.OS(), o.layout, o.Revision, o.NodeName)
			if err != nil {
				return err
			}
			mp := &monitor.MirrorPod{Client: client, Namespace: o.Namespace, Name: name, Node: o.NodeName}
			opts.Pods, opts.Events = mp, mp
		}
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
