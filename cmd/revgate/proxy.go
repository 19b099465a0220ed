package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/server"
	"github.com/revgate/revgate/proxy/upstream"
	"github.com/revgate/revgate/revisions"
)

// proxyOptions are the flags of `revgate proxy`.
type proxyOptions struct {
	cmdline.Proxy
}

// configOptions are the proxy's configuration options as the flags of c say.
func configOptions(c cmdline.Config) config.Options {
	return config.Options{
		Dirs:             c.Dirs,
		IngressClass:     c.IngressClass,
		Namespace:        c.Namespace,
		RootNamespaces:   c.RootNamespaces,
		Fallback:         model.FallbackMode(c.Fallback),
		LastKnownGoodDir: c.LastKnownGoodDir,
	}
}

// loadOptions are the options loading and translating the configuration.
func (o *proxyOptions) loadOptions() config.Options {
	c := configOptions(o.Config)
	c.Revision = o.Revision
	return c
}

// serverOptions are the server's options as the flags say; the parts that
// are not flags (notifier, watchdog) are the caller's.
func (o *proxyOptions) serverOptions() server.Options {
	return server.Options{
		HTTPAddr:          o.HTTP,
		HTTPSAddr:         o.HTTPS,
		AdminAddr:         o.Admin,
		DrainTimeout:      o.DrainTimeout,
		ShutdownDelay:     o.ShutdownDelay,
		AcceptGrace:       o.AcceptGrace,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		ClientBodyTimeout: o.ClientBodyTimeout,
		SendTimeout:       o.SendTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		Transport: upstream.TransportOptions{
			DialTimeout:            o.UpstreamDialTimeout,
			ResponseHeaderTimeout:  o.UpstreamResponseHeaderTimeout,
			MaxIdleConnsPerHost:    o.UpstreamMaxIdleConns,
			MaxResponseHeaderBytes: o.UpstreamMaxResponseHeaderBytes,
		},
		Paths:     route.PathOptions{EscapedSlashes: route.EscapedSlashes(o.EscapedSlashes), KeepRepeatedSlashes: !o.MergeSlashes},
		Pprof:     o.Pprof,
		Endpoints: server.EndpointsOptions{File: o.EndpointsFile, RelistPeriod: o.EndpointsRelistPeriod},
	}
}

func (o *proxyOptions) validate() error {
	var errs []error
	cfg := o.loadOptions()
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.HTTP == "" && o.HTTPS == "" {
		errs = append(errs, errors.New("no listener: --http-addr and --https-addr are both empty"))
	}
	if o.EndpointsRelistPeriod <= 0 {
		errs = append(errs, fmt.Errorf("invalid --endpoints-relist-period %s: want a positive duration", o.EndpointsRelistPeriod))
	}
	if err := server.ListenerFlags(o.Listeners).Validate(); err != nil {
		errs = append(errs, err)
	}
	switch route.EscapedSlashes(o.EscapedSlashes) {
	case route.EscapedSlashesReject, route.EscapedSlashesKeep, route.EscapedSlashesUnescape:
	default:
		errs = append(errs, fmt.Errorf("invalid --escaped-slashes %q: want reject, keep or unescape", o.EscapedSlashes))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("invalid --log-level %q", o.LogLevel))
	}
	return errors.Join(errs...)
}

// run serves until ctx is done (SIGTERM); see server.Process.
func (o *proxyOptions) run(ctx context.Context) error {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(o.LogLevel))
	log := logging.New(os.Stderr, lvl).With("revision", o.Revision)
	slog.SetDefault(log)
	debug.SetGCPercent(o.GCPercent)
	so := o.serverOptions()
	so.Notifier = server.SystemdNotifier{Logger: log}
	so.WatchdogInterval = server.SystemdWatchdogInterval()
	return server.Process{
		TerminationLog: o.TerminationLog,
		Revision:       o.Revision,
		Load: func() (*model.Snapshot, error) {
			// Bad flags are a failure exit too, recorded after the start record.
			if err := o.validate(); err != nil {
				return nil, err
			}
			return config.Build(o.loadOptions())
		},
		Server: so,
		Logger: log,
	}.Run(ctx)
}

// newProxyCommand is `revgate proxy`, parsing its flags into o.
func newProxyCommand(o *proxyOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   cmdline.ProxyCommand,
		Short: "Serve the gateway configuration of a revision",
		Long: `Serve the gateway: load the configuration folders (--config-dir), translate
them with object-level fallback, and proxy HTTP and HTTPS traffic by the
Ingress and IngressRoute rules. Admin endpoints (/healthz, /livez, /readyz,
/metrics, /debug/config/...) listen on --admin-addr. A start record is
appended to --termination-log first; a failure exit appends an exit record.
Listeners use SO_REUSEPORT: a traffic port still held by the process being
replaced is joined only once this one is ready. SIGTERM drains in-flight
requests. With --endpoints-file, EndpointSlices written to that file (by
revgate controller) replace the endpoints of the Services they belong to
while the gateway runs, without a new revision.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return recordFlagError(os.Args[1:], err)
	})
	return cmd
}

func init() { rootCmd.AddCommand(newProxyCommand(&proxyOptions{})) }

// recordFlagError appends a start and an exit record for a proxy whose flags
// do not parse, so that a startup monitor sees a process that started and
// failed (CrashLooping when it keeps happening), not one that never started.
// The termination log and revision are read on their own from the raw
// arguments, since flag parsing stopped at the error; whatever else in them
// does not parse is the flag error already.
func recordFlagError(args []string, flagErr error) error {
	var r cmdline.Records
	_ = cmdline.ParseProxyPart(args, &r)
	path, rev := r.TerminationLog, r.Revision
	if path == "" {
		return flagErr
	}
	pid := os.Getpid()
	err := revisions.AppendTerminationRecord(path, clock.RealClock{}, revisions.TerminationRecord{Type: revisions.RecordStart, Revision: rev, PID: pid})
	if err == nil {
		err = revisions.AppendTerminationRecord(path, clock.RealClock{}, revisions.TerminationRecord{
			Type: revisions.RecordExit, Revision: rev, PID: pid, Error: flagErr.Error(), ExitCode: 1,
		})
	}
	if err != nil {
		return errors.Join(flagErr, err)
	}
	return flagErr
}
