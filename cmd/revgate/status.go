package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/revgate/revgate/monitor/status"
	"github.com/revgate/revgate/revisions"
)

// statusOptions are the flags of `revgate status`.
type statusOptions struct {
	layout     revisions.Layout
	output     string
	kubeconfig string
	namespace  string
	selector   string
}

func init() {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show revisions, last-known-good, fallbacks and pending retries",
		Long: `status shows the revisions on disk, the published revision (and whether it is
a fallback), the last-known-good revision, every recorded fallback with its
reason, message and time, and pending retries. With --kubeconfig it also shows
the mirror pods of every node, their Ready state and fallback annotations.

In slots mode a new revision runs beside the serving one until it is
judged: published is the serving slot's revision and candidate the one rolled
out beside it; on each node the serving mirror pod is the one of the lower
revision (fallbackstatus.ServingPod).

-o json prints the same as a JSON document whose shape is stable: fields
target, revisions, published {revision, fallback, slot, pod}, candidate (the
same, when one rolls out), lastKnownGood, outcomes, fallbacks [{revision,
attempt, to, time, reason, message}], pendingRetries [{revision, at,
attempt}], nodes [{node, namespace, pod, revision, ready, slot, serving,
fallback, degraded, error}] (only with --kubeconfig) and problems.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd.Flags())
	rootCmd.AddCommand(cmd)
}

func (o *statusOptions) addFlags(fs *pflag.FlagSet) {
	addLayoutFlags(fs, &o.layout, 0)
	fs.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig: also show the mirror pods of every node")
	fs.StringVar(&o.namespace, "namespace", "kube-system", "namespace of the mirror pods")
	fs.StringVar(&o.selector, "selector", "", "label selector of the mirror pods (default app=<target>)")
}

func (o *statusOptions) validate() error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("invalid output format %q: want text or json", o.output)
	}
	o.layout = o.layout.Defaulted()
	if o.selector == "" {
		o.selector = "app=" + o.layout.Target
	}
	return o.layout.Validate()
}

func (o *statusOptions) run(ctx context.Context, w io.Writer) error {
	r, err := status.Collect(o.layout, revisions.OS())
	if err != nil {
		return err
	}
	if o.kubeconfig != "" {
		client, err := monitorKubeClient(o.kubeconfig)
		if err != nil {
			return err
		}
		nodes, err := status.CollectNodes(ctx, client, o.namespace, o.selector)
		if err != nil {
			return err
		}
		r.Nodes = nodes
		if r.Nodes == nil {
			r.Nodes = []status.Node{}
		}
	}
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
		return nil
	}
	return status.WriteText(w, r)
}
