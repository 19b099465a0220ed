package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/server"
)

// validateOptions are the flags of `revgate validate`.
type validateOptions struct {
	cmdline.Config
	// Listeners are checked as the proxy checks them at start.
	cmdline.Listeners
	// strict counts warnings as errors; default false.
	strict bool
	// output is "text" (default) or "json".
	output string
}

func (o *validateOptions) addFlags(cmd *cobra.Command) {
	o.Config.AddFlags(cmd.Flags())
	o.Listeners.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.strict, "strict", false, "count warnings as errors")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
}

func (o *validateOptions) validate() error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("invalid output format %q: want text or json", o.output)
	}
	cfg := configOptions(o.Config)
	return errors.Join(cfg.Validate(), server.ListenerFlags(o.Listeners).Validate())
}

// validateFailed is returned when the configuration has errors; exit status 1
// without a further error line.
type validateFailed struct{ errors, warnings int }

func (e validateFailed) Error() string {
	return fmt.Sprintf("configuration invalid: %d error(s), %d warning(s)", e.errors, e.warnings)
}

// ExitCode implements exitCoder.
func (e validateFailed) ExitCode() int { return 1 }

func (o *validateOptions) run(w io.Writer) error {
	problems, err := config.Validate(configOptions(o.Config))
	if err != nil {
		return err
	}
	nerr, nwarn := 0, 0
	for _, p := range problems {
		if p.Severity == model.SeverityError {
			nerr++
		} else {
			nwarn++
		}
	}
	switch o.output {
	case "json":
		if problems == nil {
			problems = []model.Problem{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(problems); err != nil {
			return fmt.Errorf("write problems: %w", err)
		}
	default:
		for _, p := range problems {
			fmt.Fprintf(w, "%s: %s\n", p.Severity, p.String())
		}
	}
	if nerr > 0 || (o.strict && nwarn > 0) {
		return validateFailed{errors: nerr, warnings: nwarn}
	}
	return nil
}

func newValidateCommand() *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate [DIR...]",
		Short: "Check a gateway configuration and print every problem",
		Long: `Validate loads gateway configuration folders (revision folders or plain
folders of YAML/JSON files) exactly as revgate proxy does and prints every
problem, one per line: file, object, field and message. It exits 1 when there
is an error, or a warning with --strict. The listener flags (--http-addr,
--https-addr, --admin-addr) are checked as the proxy checks them at start.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dirs = append(o.Dirs, args...)
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func init() { rootCmd.AddCommand(newValidateCommand()) }
