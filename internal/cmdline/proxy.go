package cmdline

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// ProxyCommand is the subcommand that serves the gateway.
const ProxyCommand = "proxy"

// IngressClassFlag is the proxy's flag naming the ingress class it serves.
const IngressClassFlag = "ingress-class"

// Fallback modes of --fallback, the default first; proxy/model.FallbackMode
// has the same (a test of cmd/revgate checks it).
var fallbackModes = []string{"exclude", "backfill", "off"}

// FallbackModes returns the values --fallback accepts, the default first.
func FallbackModes() []string { return slices.Clone(fallbackModes) }

// Config are the flags saying which configuration the gateway loads and how
// it translates it; `revgate proxy` and `revgate validate` take them alike.
type Config struct {
	// Dirs are the folders loaded (--config-dir, repeatable): revision
	// folders or plain folders of YAML/JSON files.
	Dirs []string
	// IngressClass is the ingress class served (--ingress-class); default "revgate".
	IngressClass string
	// Namespace is the namespace of Secrets read from secrets/<name>/
	// folders and of objects without one (--namespace); default "default".
	Namespace string
	// RootNamespaces restricts IngressRoute roots to these namespaces
	// (--root-namespaces); empty allows roots anywhere.
	RootNamespaces []string
	// Fallback is the object-level fallback mode (--fallback): exclude
	// (the default), backfill or off; other values do not parse.
	Fallback string
	// LastKnownGoodDir is the revision folder backfill reads
	// (--last-known-good-dir); empty: resolved through the last-known-good link.
	LastKnownGoodDir string
}

// AddFlags registers --config-dir, --ingress-class, --namespace,
// --root-namespaces, --fallback and --last-known-good-dir.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Dirs, "config-dir", nil, "folder of gateway configuration: a revision folder or a folder of YAML/JSON files (repeatable)")
	fs.StringVar(&c.IngressClass, IngressClassFlag, "revgate", "ingress class served")
	fs.StringVar(&c.Namespace, "namespace", "default", "namespace of Secrets read from secrets/<name>/ folders and of objects without one")
	fs.StringSliceVar(&c.RootNamespaces, "root-namespaces", nil, "namespaces where IngressRoute roots are allowed (empty: anywhere)")
	fs.Var(newChoiceValue(&c.Fallback, fallbackModes[0], "mode", "fallback mode", fallbackModes...), "fallback", "object-level fallback: exclude, backfill or off")
	fs.StringVar(&c.LastKnownGoodDir, "last-known-good-dir", "", "last-known-good revision folder for --fallback=backfill (default: resolved through the last-known-good link)")
}

// Listeners are the gateway's listen addresses; `revgate proxy` and
// `revgate validate` take them alike.
type Listeners struct {
	// HTTP is --http-addr; default ":8080", empty disables.
	HTTP string
	// HTTPS is --https-addr; default ":8443", empty disables.
	HTTPS string
	// Admin is --admin-addr; default "127.0.0.1:9901", empty disables.
	Admin string
}

// AddFlags registers --http-addr, --https-addr and --admin-addr.
func (l *Listeners) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.HTTP, "http-addr", ":8080", "plain HTTP listener address (empty disables)")
	fs.StringVar(&l.HTTPS, "https-addr", ":8443", "HTTPS listener address; certificates by SNI, handshakes without a matching certificate fail (empty disables)")
	fs.StringVar(&l.Admin, "admin-addr", "127.0.0.1:9901", "admin listener address for /healthz, /readyz, /metrics and /debug (empty disables)")
}

// LocalEndpoint is where a client on the node reaches a listener bound to
// addr: its host, with an unspecified or wildcard host (":8080",
// "0.0.0.0:8080", "[::]:8080") becoming 127.0.0.1, and its port; ok is false
// for an address without a usable port.
func LocalEndpoint(addr string) (host string, port int, ok bool) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		return "", 0, false
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = "127.0.0.1"
	}
	return h, n, true
}

// Records are the flags of the proxy's start and exit records: the revision
// it serves and the termination log the records are appended to.
type Records struct {
	// Revision is --revision, also stamped into admin headers and metrics;
	// default 0 (unknown).
	Revision int
	// TerminationLog is --termination-log; default
	// /var/log/revgate/termination.log, empty disables the records.
	TerminationLog string
}

// AddFlags registers --revision and --termination-log.
func (r *Records) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&r.Revision, "revision", 0, "revision being served, stamped into the termination log, admin headers and metrics")
	fs.StringVar(&r.TerminationLog, "termination-log", "/var/log/revgate/termination.log", "file the start and failure-exit records are appended to (empty disables)")
}

// Proxy is the command line of `revgate proxy`. The defaults of its
// durations and sizes are those of proxy/server and proxy/upstream (a test
// of cmd/revgate checks them).
type Proxy struct {
	Config
	Records
	Listeners
	// EscapedSlashes is --escaped-slashes: reject (the default), keep or unescape.
	EscapedSlashes string
	// MergeSlashes is --merge-slashes; default true.
	MergeSlashes bool
	// DrainTimeout is --drain-timeout; default 30s.
	DrainTimeout time.Duration
	// ShutdownDelay is --shutdown-delay; default 2s, negative: none.
	ShutdownDelay time.Duration
	// AcceptGrace is --accept-grace; default 500ms, negative: none.
	AcceptGrace time.Duration
	// ReadHeaderTimeout is --read-header-timeout; default 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is --idle-timeout; default 2m.
	IdleTimeout time.Duration
	// ClientBodyTimeout is --client-body-timeout; default 60s, negative: none.
	ClientBodyTimeout time.Duration
	// SendTimeout is --send-timeout; default 60s, negative: none.
	SendTimeout time.Duration
	// MaxHeaderBytes is --max-header-bytes; default 64 KiB.
	MaxHeaderBytes int
	// UpstreamDialTimeout is --upstream-dial-timeout; default 5s.
	UpstreamDialTimeout time.Duration
	// UpstreamResponseHeaderTimeout is --upstream-response-header-timeout;
	// default 60s.
	UpstreamResponseHeaderTimeout time.Duration
	// UpstreamMaxIdleConns is --upstream-max-idle-conns; default 256.
	UpstreamMaxIdleConns int
	// UpstreamMaxResponseHeaderBytes is --upstream-max-response-header-bytes;
	// default 1 MiB.
	UpstreamMaxResponseHeaderBytes int64
	// GCPercent is --gc-percent (GOGC); default 400: a proxy allocates per
	// request and its live heap is small, so collecting less often is cheap.
	GCPercent int
	// Pprof is --pprof; default false.
	Pprof bool
	// EndpointsFile is --endpoints-file; default empty (off).
	EndpointsFile string
	// EndpointsRelistPeriod is --endpoints-relist-period; default 5s.
	EndpointsRelistPeriod time.Duration
	// LogLevel is --log-level: debug, info (the default), warn or error.
	LogLevel string
}

// AddFlags registers every flag of `revgate proxy`.
func (p *Proxy) AddFlags(fs *pflag.FlagSet) {
	p.Config.AddFlags(fs)
	p.Records.AddFlags(fs)
	p.Listeners.AddFlags(fs)
	fs.StringVar(&p.EscapedSlashes, "escaped-slashes", "reject", "what %2F, %5C and '\\' in a request path do: reject (400), keep (as data inside a segment; only for upstreams that never decode them) or unescape (into '/')")
	fs.BoolVar(&p.MergeSlashes, "merge-slashes", true, "merge repeated slashes in request paths before routing and forwarding")
	fs.DurationVar(&p.DrainTimeout, "drain-timeout", 30*time.Second, "how long in-flight requests may finish after SIGTERM")
	fs.DurationVar(&p.ShutdownDelay, "shutdown-delay", 2*time.Second, "how long to keep serving, not ready, after SIGTERM before closing listeners (negative: none)")
	fs.DurationVar(&p.AcceptGrace, "accept-grace", 500*time.Millisecond, "at shutdown, how long connections accepted just before the listeners closed have to send their first request (negative: none)")
	fs.DurationVar(&p.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "limit for reading a request's headers")
	fs.DurationVar(&p.IdleTimeout, "idle-timeout", 120*time.Second, "idle client keep-alive connections are closed after this")
	fs.DurationVar(&p.ClientBodyTimeout, "client-body-timeout", 60*time.Second, "longest wait between two reads of a request body (408 and the connection closed beyond; negative: none)")
	fs.DurationVar(&p.SendTimeout, "send-timeout", 60*time.Second, "longest wait between two writes of a response to a client that does not read (the connection is closed beyond; negative: none)")
	fs.IntVar(&p.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block accepted (431 beyond)")
	fs.DurationVar(&p.UpstreamDialTimeout, "upstream-dial-timeout", 5*time.Second, "limit for connecting to an upstream endpoint (502 beyond)")
	fs.DurationVar(&p.UpstreamResponseHeaderTimeout, "upstream-response-header-timeout", 60*time.Second, "limit for an upstream's response headers (504 beyond)")
	fs.IntVar(&p.UpstreamMaxIdleConns, "upstream-max-idle-conns", 256, "idle keep-alive connections kept per upstream endpoint")
	fs.Int64Var(&p.UpstreamMaxResponseHeaderBytes, "upstream-max-response-header-bytes", 1<<20, "largest upstream response header block accepted (502 beyond)")
	fs.IntVar(&p.GCPercent, "gc-percent", 400, "Go garbage collector target percentage (GOGC); GOMEMLIMIT still applies")
	fs.BoolVar(&p.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the admin listener")
	fs.StringVar(&p.EndpointsFile, "endpoints-file", "", "live endpoints file (a v1 List of EndpointSlices, by default written to <resource-dir>/<target>-live/endpoints.json) applied without a new revision; its folder is watched (empty: off, the revision's endpoints are served)")
	fs.DurationVar(&p.EndpointsRelistPeriod, "endpoints-relist-period", 5*time.Second, "how often the live endpoints file is read besides on watch events")
	fs.StringVar(&p.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// NewProxy returns the proxy's command line with every flag at its default.
func NewProxy() Proxy { return defaults[Proxy]() }

// Args renders p as the arguments of a proxy pod: --revision and
// --termination-log always (where its records go never rests on a
// default), every other flag when it differs from its default; in a stable
// order, the folders first.
func (p Proxy) Args() []string {
	return render(p, flagNames(new(Records).AddFlags)...)
}

// Overrides renders just the flags of p that differ from their defaults:
// arguments to append to another proxy command line (--proxy-arg), where a
// flag left at its default must not replace what that command line says.
func (p Proxy) Overrides() []string {
	return render(p)
}

// ParseProxy parses args as `revgate proxy` does.
func ParseProxy(args []string) (Proxy, error) {
	return parse[Proxy](args)
}

// ParseProxyPart reads from args, arguments of `revgate proxy`, just the
// flags that parts register (parts of Proxy: &Config, &Listeners, &Records),
// into the parts. Every other flag is skipped with its value, known to the
// proxy or not, and so is a value that does not parse, which the error
// reports; the arguments after it are read all the same, the last good value
// winning. A field whose flag is not given keeps its default. This reads
// what matters of arguments that may not parse as a whole: the free-form
// --proxy-arg values of an install, or a proxy's own arguments after its
// flag parsing failed.
func ParseProxyPart(args []string, parts ...Part) error {
	return parsePart(args, new(Proxy).AddFlags, parts)
}
