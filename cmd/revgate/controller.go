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
	"github.com/revgate/revgate/internal/logging"
)

// controllerOptions are the flags of `revgate controller`: the layout and
// the pod-rendering flags of `revgate install`, and the controller's own.
type controllerOptions struct {
	controller.Options
}

func (o *controllerOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	addLayoutFlags(fs, &o.Layout, withLock|withTerminationLog)
	o.Render.AddFlags(fs)
	// As install and monitor: $NODE_NAME, else the host name.
	o.NodeName = defaultNodeName()
	o.Options.AddFlags(fs)
}

func (o *controllerOptions) validate() error {
	if err := errors.Join(o.Options.Validate(), checkProxyListeners(o.Render.ProxyArgs)); err != nil {
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
	c, err := controller.New(o.Options, controller.Deps{Client: client, Dynamic: dyn, Logger: log})
	if err != nil {
		return err
	}
	return c.Run(ctx)
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
time; a different snapshot is installed at once.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.addFlags(cmd)
	return cmd
}

func init() { rootCmd.AddCommand(newControllerCommand()) }
