package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/revgate/revgate/controller"
	"github.com/revgate/revgate/controller/rollout"
	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/internal/logging"
)

// controllerOptions are the flags of `revgate controller`: the layout and
// the pod-rendering flags of `revgate install`, and the controller's own.
type controllerOptions struct {
	controller.Options
	// render are the pod-rendering flags, made Options.Render by validate.
	render cmdline.Render
	// Rollout says whether snapshots roll out node by node.
	Rollout rollout.Flags
}

func (o *controllerOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	addLayoutFlags(fs, &o.Layout, cmdline.WithLock|cmdline.WithTerminationLog)
	o.render.AddFlags(fs)
	// As install and monitor: $NODE_NAME, else the host name.
	o.NodeName = cmdline.DefaultNodeName()
	o.Options.AddFlags(fs)
	o.Rollout.AddFlags(fs)
}

func (o *controllerOptions) validate() error {
	o.Render = renderOptions(o.render)
	if err := errors.Join(o.Options.Validate(), o.Rollout.Validate(o.Layout.Target, o.NodeName), checkProxyListeners(o.Render.ProxyArgs)); err != nil {
		return err
	}
	// The proxy's configuration options as the rendered proxy will parse
	// them, so that the controller selects and judges what it serves.
	cfg := validationOptions(o.Render.ProxyArgs)
	cfg.IngressClass = o.IngressClass
	o.Config = cfg
	return nil
}

func (o *controllerOptions) run(ctx context.Context, _ io.Writer) error {
	log := logging.New(nil, slog.LevelInfo)
	// client-go's own lines (reflectors, the event broadcaster) go where the
	// controller's go: to journald with fields under systemd.
	klog.SetSlogLogger(log.With("component", "client-go"))
	rc, err := o.RestConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("create Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("create Kubernetes client: %w", err)
	}
	deps := controller.Deps{Client: client, Dynamic: dyn, Logger: log}
	var nodes *rollout.Rollout
	if o.Rollout.NodeByNode() {
		if nodes, err = o.Rollout.New(client, o.Layout.Target, o.NodeName, log); err != nil {
			return err
		}
		deps.Rollout = nodes
	}
	c, err := controller.New(o.Options, deps)
	if err != nil {
		return err
	}
	if nodes == nil {
		return c.Run(ctx)
	}
	// The node's rollout status is renewed while the controller runs, and
	// no longer: a node whose controller is gone is not waited for.
	ctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		_ = nodes.Run(ctx)
	}()
	err = c.Run(ctx)
	cancel()
	<-renewed
	return err
}

func newControllerCommand() *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Turn the cluster's Ingresses and IngressRoutes into guarded revisions",
		Long: `Controller watches Ingresses, IngressClasses, Services, EndpointSlices, TLS
Secrets and IngressRoutes (contour.heptio.com/v1beta1) and installs what the
gateway serves as a new revision, through the installer and under its lock,
whenever the routing structure changes: not on every event, and never when
the rendered snapshot equals the installed one. EndpointSlice changes reach
the running gateway without a revision. Broken, excluded and backfilled
objects get Events; IngressRoutes get Contour's status; served Ingresses get
the node's address in status.loadBalancer. When the startup monitor falls
back from a revision, its snapshot is held back until the monitor's retry
time; a different snapshot is installed at once.

With --rollout=node-by-node, the nodes that run the controller for the same
--target take turns, in the order of their --node-name, coordinated through
coordination.k8s.io Leases in --rollout-namespace: a node installs a
snapshot only after every node before it judged it good; a fallback on any
node stops that snapshot (Event RolloutStopped naming the node and the
reason) and a newer snapshot starts a new rollout.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.addFlags(cmd)
	return cmd
}

func init() { rootCmd.AddCommand(newControllerCommand()) }
