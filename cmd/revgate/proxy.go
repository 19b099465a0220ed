package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/internal/rawflag"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/server"
	"github.com/revgate/revgate/proxy/upstream"
	"github.com/revgate/revgate/revisions"
)

// Defaults of `revgate proxy` beyond those of proxy/server.
const (
	defaultTerminationLog = "/var/log/revgate/termination.log"
	// defaultGCPercent trades memory for CPU: a proxy allocates per request
	// and its live heap is small, so collecting less often is cheap.
	defaultGCPercent = 400
)

// proxyOptions are the flags of `revgate proxy`.
type proxyOptions struct {
	config         config.Options
	server         server.Options
	listeners      server.ListenerFlags
	escapedSlashes string
	mergeSlashes   bool
	terminationLog string
	gcPercent      int
	logLevel       string
}

func (o *proxyOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	o.config.AddFlags(fs)
	fs.IntVar(&o.config.Revision, "revision", 0, "revision being served, stamped into the termination log, admin headers and metrics")
	o.listeners.AddFlags(fs)
	fs.StringVar(&o.escapedSlashes, "escaped-slashes", string(route.EscapedSlashesReject), "what %2F, %5C and '\\' in a request path do: reject (400), keep (as data inside a segment; only for upstreams that never decode them) or unescape (into '/')")
	fs.BoolVar(&o.mergeSlashes, "merge-slashes", true, "merge repeated slashes in request paths before routing and forwarding")
	fs.StringVar(&o.terminationLog, "termination-log", defaultTerminationLog, "file the start and failure-exit records are appended to (empty disables)")
	fs.DurationVar(&o.server.DrainTimeout, "drain-timeout", server.DefaultDrainTimeout, "how long in-flight requests may finish after SIGTERM")
	fs.DurationVar(&o.server.ShutdownDelay, "shutdown-delay", server.DefaultShutdownDelay, "how long to keep serving, not ready, after SIGTERM before closing listeners (negative: none)")
	fs.DurationVar(&o.server.AcceptGrace, "accept-grace", server.DefaultAcceptGrace, "at shutdown, how long connections accepted just before the listeners closed have to send their first request (negative: none)")
	fs.DurationVar(&o.server.ReadHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "limit for reading a request's headers")
	fs.DurationVar(&o.server.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "idle client keep-alive connections are closed after this")
	fs.IntVar(&o.server.MaxHeaderBytes, "max-header-bytes", server.DefaultMaxHeaderBytes, "largest request header block accepted (431 beyond)")
	fs.DurationVar(&o.server.Transport.DialTimeout, "upstream-dial-timeout", 5*time.Second, "limit for connecting to an upstream endpoint (502 beyond)")
	fs.DurationVar(&o.server.Transport.ResponseHeaderTimeout, "upstream-response-header-timeout", 60*time.Second, "limit for an upstream's response headers (504 beyond)")
	fs.IntVar(&o.server.Transport.MaxIdleConnsPerHost, "upstream-max-idle-conns", 256, "idle keep-alive connections kept per upstream endpoint")
	fs.Int64Var(&o.server.Transport.MaxResponseHeaderBytes, "upstream-max-response-header-bytes", upstream.DefaultMaxResponseHeaderBytes, "largest upstream response header block accepted (502 beyond)")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent, "Go garbage collector target percentage (GOGC); GOMEMLIMIT still applies")
	fs.BoolVar(&o.server.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the admin listener")
	fs.StringVar(&o.server.Endpoints.File, "endpoints-file", "", "live endpoints file (a v1 List of EndpointSlices, by default written to <resource-dir>/<target>-live/endpoints.json) applied without a new revision; its folder is watched (empty: off, the revision's endpoints are served)")
	fs.DurationVar(&o.server.Endpoints.RelistPeriod, "endpoints-relist-period", server.DefaultEndpointsRelistPeriod, "how often the live endpoints file is read besides on watch events")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

func (o *proxyOptions) validate() error {
	var errs []error
	if err := o.config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.listeners.HTTP == "" && o.listeners.HTTPS == "" {
		errs = append(errs, errors.New("no listener: --http-addr and --https-addr are both empty"))
	}
	if o.server.Endpoints.RelistPeriod <= 0 {
		errs = append(errs, fmt.Errorf("invalid --endpoints-relist-period %s: want a positive duration", o.server.Endpoints.RelistPeriod))
	}
	if err := o.listeners.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch route.EscapedSlashes(o.escapedSlashes) {
	case route.EscapedSlashesReject, route.EscapedSlashesKeep, route.EscapedSlashesUnescape:
	default:
		errs = append(errs, fmt.Errorf("invalid --escaped-slashes %q: want reject, keep or unescape", o.escapedSlashes))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("invalid --log-level %q", o.logLevel))
	}
	return errors.Join(errs...)
}

// run serves until ctx is done (SIGTERM); see server.Process.
func (o *proxyOptions) run(ctx context.Context) error {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(o.logLevel))
	log := logging.New(os.Stderr, lvl).With("revision", o.config.Revision)
	slog.SetDefault(log)
	debug.SetGCPercent(o.gcPercent)
	so := o.server
	so.HTTPAddr, so.HTTPSAddr, so.AdminAddr = o.listeners.HTTP, o.listeners.HTTPS, o.listeners.Admin
	so.Paths = route.PathOptions{EscapedSlashes: route.EscapedSlashes(o.escapedSlashes), KeepRepeatedSlashes: !o.mergeSlashes}
	so.Notifier = server.SystemdNotifier{Logger: log}
	so.WatchdogInterval = server.SystemdWatchdogInterval()
	return server.Process{
		TerminationLog: o.terminationLog,
		Revision:       o.config.Revision,
		Load: func() (*model.Snapshot, error) {
			// Bad flags are a failure exit too, recorded after the start record.
			if err := o.validate(); err != nil {
				return nil, err
			}
			return config.Build(o.config)
		},
		Server: so,
		Logger: log,
	}.Run(ctx)
}

func init() {
	o := &proxyOptions{server: server.Options{Transport: upstream.TransportOptions{}}}
	cmd := &cobra.Command{
		Use:   "proxy",
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
	o.addFlags(cmd)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return recordFlagError(os.Args[1:], err)
	})
	rootCmd.AddCommand(cmd)
}

// recordFlagError appends a start and an exit record for a proxy whose flags
// do not parse, so that a startup monitor sees a process that started and
// failed (CrashLooping when it keeps happening), not one that never started.
// The termination log and revision are read from the raw arguments, since
// flag parsing stopped at the error.
func recordFlagError(args []string, flagErr error) error {
	path, ok := rawflag.Last(args, "termination-log")
	if !ok {
		path = defaultTerminationLog
	}
	v, _ := rawflag.Last(args, "revision")
	rev, _ := strconv.Atoi(v)
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
