package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/pruner"
	"github.com/revgate/revgate/revisions"
)

// pruneOptions are the flags of `revgate prune`.
type pruneOptions struct {
	layout      revisions.Layout
	keep        int
	dryRun      bool
	lockTimeout time.Duration
}

func (o *pruneOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&o.keep, "keep", pruner.DefaultKeep, "how many of the newest revisions to keep")
	addLayoutFlags(fs, &o.layout, cmdline.WithLock)
	fs.DurationVar(&o.lockTimeout, "lock-timeout", revisions.DefaultLockTimeout, "how long to wait for the lock")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be removed, remove nothing")
}

func (o *pruneOptions) validate() error {
	o.layout = o.layout.Defaulted()
	if err := o.layout.Validate(); err != nil {
		return err
	}
	if o.keep < 0 {
		return fmt.Errorf("invalid --keep %d", o.keep)
	}
	if o.lockTimeout < 0 {
		return fmt.Errorf("invalid --lock-timeout %s", o.lockTimeout)
	}
	return nil
}

func (o *pruneOptions) run(ctx context.Context, w io.Writer) error {
	p := &pruner.Pruner{Layout: o.layout, Keep: o.keep, DryRun: o.dryRun, LockTimeout: o.lockTimeout, Logger: logging.New(nil, slog.LevelInfo)}
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	for _, n := range res.Removed {
		fmt.Fprintf(w, "%s revision %d\n", verb, n)
	}
	for _, name := range res.Ignored {
		fmt.Fprintf(w, "left alone %s: not a revision folder name\n", name)
	}
	if len(res.Removed) == 0 {
		fmt.Fprintln(w, "nothing to prune")
	}
	return nil
}

func newPruneCommand() *cobra.Command {
	o := &pruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove old revisions, never the protected ones",
		Long: `Prune keeps the newest --keep revisions and always the last-known-good
revision, the revisions of the published operand and monitor manifests, and
every revision awaiting a retry; it removes the others under the lock.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.addFlags(cmd)
	return cmd
}

func init() { rootCmd.AddCommand(newPruneCommand()) }
