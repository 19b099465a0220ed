// Command revgate is a node-level static-pod supervisor with an embedded HTTP
// gateway: install, monitor, prune, supervise and serve revisions of a gateway
// configuration, and fall back to the last-known-good one when a revision fails.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// rootCmd is the revgate command; each role adds its subcommand from its own
// file with an init function.
var rootCmd = &cobra.Command{
	Use:           "revgate",
	Short:         "Static-pod supervisor with an embedded HTTP gateway",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "revgate:", err)
		os.Exit(exitCode(err))
	}
}

// exitCoder is implemented by errors that want a specific exit status.
type exitCoder interface{ ExitCode() int }

func exitCode(err error) int {
	if ec, ok := err.(exitCoder); ok {
		return ec.ExitCode()
	}
	return 1
}

// options is a command's flags with their checks and its work.
type options interface {
	validate() error
	run(ctx context.Context, out io.Writer) error
}

// runE is the RunE of a command built on options: validate the flags,
// then run with the command's context and output.
func runE(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), cmd.OutOrStdout())
	}
}
