package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/revgate/revgate/demo"
)

// demoUpstreamOptions are the flags of the hidden `revgate demo-upstream`.
type demoUpstreamOptions struct {
	// listen is the address to serve on; default 127.0.0.1:9081.
	listen string
	// name is put into every response; default upstream-1.
	name string
}

func newDemoUpstreamCommand() *cobra.Command {
	o := &demoUpstreamOptions{}
	cmd := &cobra.Command{
		Use:    "demo-upstream",
		Short:  "Serve a demo HTTP upstream whose responses name it",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demo.Serve(cmd.Context(), o.listen, o.name, slog.Default())
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", demo.DefaultUpstreams[0].Addr, "address to listen on")
	cmd.Flags().StringVar(&o.name, "name", demo.DefaultUpstreams[0].Name, "name put into every response")
	return cmd
}

func init() { rootCmd.AddCommand(newDemoUpstreamCommand()) }
