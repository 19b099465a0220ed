package controller

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/revisions"
)

// Defaults of Options.
const (
	// DefaultQuietPeriod: a snapshot is rendered once no change came for this long...
	DefaultQuietPeriod = time.Second
	// DefaultMaxDelay: ...or this long after the first change of a burst.
	DefaultMaxDelay = 10 * time.Second
	// DefaultRetryGrace is how long after the monitor's retry time the
	// controller waits for the monitor to roll a failed revision out again
	// before installing the same snapshot itself.
	DefaultRetryGrace = time.Minute
	// DefaultResync is the period of a full pass over every object (status
	// and snapshot), whatever the watches said.
	DefaultResync = 10 * time.Minute
	// DefaultQPS and DefaultBurst bound the controller's API requests:
	// status writes of thousands of Ingresses at client-go's default of 5
	// per second would take half an hour.
	DefaultQPS   = 50
	DefaultBurst = 100
)

// Timings that are not flags.
const (
	// endpointsQuiet and endpointsMaxDelay debounce EndpointSlice changes:
	// an endpoint update reaches the gateway well within a second.
	endpointsQuiet    = 50 * time.Millisecond
	endpointsMaxDelay = 250 * time.Millisecond
	// statusQuiet and statusMaxDelay debounce status writes.
	statusQuiet    = 200 * time.Millisecond
	statusMaxDelay = 2 * time.Second
	// diskPoll is how often the published manifest, the state file and the
	// last-known-good link are read for the monitor's verdicts.
	diskPoll = time.Second
	// ingressRoutePoll is how often discovery is asked whether the
	// IngressRoute CRD has appeared.
	ingressRoutePoll = 30 * time.Second
)

// Options configure the controller. Zero values of optional fields take
// their defaults in Validate.
type Options struct {
	// Layout of the target, as for revgate install.
	Layout revisions.Layout
	// Render says what the rendered pods run, as for revgate install. The
	// controller appends --ingress-class to the proxy's arguments, so that
	// the gateway serves the class the controller selects, and writes the
	// live endpoints to Render.EndpointsFile (--endpoints-file; default
	// Layout.EndpointsFile()), which the rendered proxy follows.
	Render installer.RenderOptions
	// Config are the proxy's configuration options (ingress class, root
	// namespaces, fallback mode) as the rendered proxy runs with them; the
	// command derives them from Render.ProxyArgs. IngressClass overrides
	// Config.IngressClass.
	Config config.Options
	// Kubeconfig is the kubeconfig file (--kubeconfig); empty: in-cluster.
	Kubeconfig string
	// NodeName is this node (--node-name; the flag defaults to the host
	// name; required): Events
	// about revisions go on the mirror pod <target>-<node>, and without a
	// publish address the node's address is published in Ingress status.
	NodeName string
	// IngressClass is the ingress class served (--ingress-class); default "revgate".
	IngressClass string
	// Namespaces restricts the watched namespaces (--namespaces); empty: all.
	Namespaces []string
	// PublishAddress is the IP address or host name written to the status of
	// every served Ingress (--publish-address); default: the node's address.
	PublishAddress string
	// QuietPeriod and MaxDelay debounce changes (--sync-quiet-period,
	// --sync-max-delay); default 1s and 10s.
	QuietPeriod, MaxDelay time.Duration
	// RetryGrace (--retry-grace); default DefaultRetryGrace.
	RetryGrace time.Duration
	// Resync (--resync-period); default DefaultResync.
	Resync time.Duration
	// LockTimeout bounds the wait for the installer's lock; default
	// revisions.DefaultLockTimeout.
	LockTimeout time.Duration
	// QPS and Burst of the Kubernetes client (--kube-api-qps, --kube-api-burst).
	QPS   float32
	Burst int
}

// AddFlags registers the controller's own flags; the command registers the
// layout and the rendering flags, as `revgate install` does.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.setDefaults()
	if o.NodeName == "" {
		o.NodeName, _ = os.Hostname()
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file of the cluster (default: the in-cluster configuration)")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name: revision Events go on the mirror pod <target>-<node name>, and its address is published when --publish-address is empty (default $NODE_NAME, else the host name)")
	fs.StringVar(&o.IngressClass, "ingress-class", o.IngressClass, "ingress class served (also handed to the rendered proxy)")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces, "namespaces to watch (comma-separated; default all)")
	fs.StringVar(&o.PublishAddress, "publish-address", o.PublishAddress, "IP address or host name written to status.loadBalancer of every served Ingress (default: the node's address)")
	fs.DurationVar(&o.QuietPeriod, "sync-quiet-period", o.QuietPeriod, "render a snapshot once no change came for this long")
	fs.DurationVar(&o.MaxDelay, "sync-max-delay", o.MaxDelay, "render a snapshot at the latest this long after the first change of a burst")
	fs.DurationVar(&o.RetryGrace, "retry-grace", o.RetryGrace, "how long after the startup monitor's retry time to wait for it before installing a failed snapshot again")
	fs.DurationVar(&o.Resync, "resync-period", o.Resync, "period of a full pass over every object")
	fs.DurationVar(&o.LockTimeout, "lock-timeout", o.LockTimeout, "how long to wait for the installer's lock")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "queries per second to the Kubernetes API")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "burst of queries to the Kubernetes API")
}

func (o *Options) setDefaults() {
	if o.IngressClass == "" {
		o.IngressClass = config.DefaultIngressClass
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&o.QuietPeriod, DefaultQuietPeriod}, {&o.MaxDelay, DefaultMaxDelay}, {&o.RetryGrace, DefaultRetryGrace}, {&o.Resync, DefaultResync}, {&o.LockTimeout, revisions.DefaultLockTimeout}} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
}

// Validate checks the options and fills in defaults: the layout is made
// absolute (the pods do not run in this folder), the rendering options are
// completed, and the proxy is told the ingress class.
func (o *Options) Validate() error {
	o.setDefaults()
	var errs []error
	o.Layout = o.Layout.Defaulted()
	if err := o.Layout.Validate(); err != nil {
		errs = append(errs, err)
	}
	abs, err := o.Layout.Absolute()
	if err != nil {
		errs = append(errs, err)
	}
	o.Layout = abs
	if o.Render.EndpointsFile == "" {
		o.Render.EndpointsFile = o.Layout.EndpointsFile()
	}
	if err := o.Render.Complete(); err != nil {
		errs = append(errs, err)
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required (no host name found)"))
	}
	if msgs := validation.IsDNS1123Subdomain(o.IngressClass); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid --ingress-class %q: %v", o.IngressClass, msgs))
	}
	for _, ns := range o.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("invalid namespace %q in --namespaces: %v", ns, msgs))
		}
	}
	if a := o.PublishAddress; a != "" && net.ParseIP(a) == nil && len(validation.IsDNS1123Subdomain(a)) > 0 {
		errs = append(errs, fmt.Errorf("invalid --publish-address %q: want an IP address or a DNS name", a))
	}
	for name, d := range map[string]time.Duration{"--sync-quiet-period": o.QuietPeriod, "--sync-max-delay": o.MaxDelay, "--retry-grace": o.RetryGrace, "--resync-period": o.Resync, "--lock-timeout": o.LockTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	if o.MaxDelay < o.QuietPeriod {
		errs = append(errs, fmt.Errorf("--sync-max-delay %s is below --sync-quiet-period %s", o.MaxDelay, o.QuietPeriod))
	}
	if o.QPS < 0 || o.Burst < 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must not be negative"))
	}
	o.Config.IngressClass = o.IngressClass
	// Last among the proxy's arguments, so that the proxy serves this class
	// whatever a --proxy-arg says.
	class := cmdline.Arg(cmdline.IngressClassFlag, o.IngressClass)
	if n := len(o.Render.ProxyArgs); n == 0 || o.Render.ProxyArgs[n-1] != class {
		o.Render.ProxyArgs = append(o.Render.ProxyArgs, class)
	}
	return errors.Join(errs...)
}

// RestConfig loads the client configuration: the kubeconfig file, or the
// in-cluster configuration when none is given; QPS and Burst applied.
func (o *Options) RestConfig() (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if o.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes client configuration: %w", err)
	}
	rc.QPS, rc.Burst = o.QPS, o.Burst
	rc.UserAgent = Component
	return rc, nil
}
