package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/logging"
	"github.com/revgate/revgate/monitor"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/server"
	"github.com/revgate/revgate/revisions"
)

// stepDelayEnv, when set to a duration, makes the installer pause after each
// step. It exists only so that the crash test can land a SIGKILL between any
// two steps; it is not a user-facing setting.
const stepDelayEnv = "REVGATE_TEST_INSTALL_STEP_DELAY"

// The monitor's mirror-pod Event sinks serve the installer too.
var (
	_ installer.EventSink    = (*monitor.MirrorPod)(nil)
	_ installer.PodEventSink = (*monitor.NodeMirrorPods)(nil)
)

// installOptions are the flags of `revgate install`.
type installOptions struct {
	layout revisions.Layout

	sourceDir string

	kubeconfig         string
	nodeName           string
	namespace          string
	configMaps         []string
	secrets            []string
	optionalConfigMaps []string
	optionalSecrets    []string
	revisionedNames    bool
	retryTimeout       time.Duration

	revision    int
	render      installer.RenderOptions
	lockTimeout time.Duration
	strict      bool
	noPublish   bool
}

func (o *installOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.sourceDir, "source-dir", "", "local configuration folder: configmaps/<name>/<key>, secrets/<name>/<key>; plain files become keys of the ConfigMap \"config\"")
	addLayoutFlags(fs, &o.layout, withLock|withTerminationLog)
	fs.IntVar(&o.revision, "revision", 0, "revision to install (default: highest installed + 1)")

	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to read ConfigMaps and Secrets from and record Events in")
	fs.StringVar(&o.nodeName, "node-name", defaultNodeName(), "node name; Events are recorded on the mirror pod <target>-<node name> (default $NODE_NAME, else the host name)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the ConfigMaps and Secrets")
	fs.StringSliceVar(&o.configMaps, "configmaps", nil, "ConfigMaps to install (comma-separated, repeatable)")
	fs.StringSliceVar(&o.secrets, "secrets", nil, "Secrets to install (comma-separated, repeatable)")
	fs.StringSliceVar(&o.optionalConfigMaps, "optional-configmaps", nil, "ConfigMaps to install when they exist")
	fs.StringSliceVar(&o.optionalSecrets, "optional-secrets", nil, "Secrets to install when they exist")
	fs.BoolVar(&o.revisionedNames, "revisioned-names", false, "read every ConfigMap and Secret named <name> as <name>-<revision>, the copies OpenShift's revision controller makes, and install it as <name> (needs --revision)")
	fs.DurationVar(&o.retryTimeout, "retry-timeout", installer.DefaultRetryTimeout, "how long to retry a Kubernetes read failing with a connection error, 5xx or 429")

	o.render.AddFlags(fs)
	fs.DurationVar(&o.lockTimeout, "lock-timeout", revisions.DefaultLockTimeout, "how long to wait for the lock")
	fs.BoolVar(&o.strict, "strict", false, "refuse the configuration on validation warnings too")
	fs.BoolVar(&o.noPublish, "no-publish", false, "write the revision but do not publish its manifests")
	addFlagAliases(fs, installFlagAliases)
}

// installFlagAliases are library-go installer flags spelled differently from
// revgate's with the same meaning. Its other flags either have revgate's
// spelling already (--kubeconfig, --revision, --namespace, --configmaps,
// --secrets, --optional-configmaps, --optional-secrets, --resource-dir) or
// mean something revgate does not do (--pod reads the pod from a ConfigMap,
// revgate renders it; --timeout-duration bounds the whole install; --cert-dir
// and --cert-* copy certificates outside revisions).
var installFlagAliases = map[string]string{
	"pod-manifest-dir":        "manifests-dir",
	"pod-manifests-lock-file": "lock-file",
}

func (o *installOptions) validate() error {
	o.layout = o.layout.Defaulted()
	var errs []error
	if err := o.layout.Validate(); err != nil {
		errs = append(errs, err)
	}
	// The rendered pods do not run in this folder: their paths must be absolute.
	abs, err := o.layout.Absolute()
	if err != nil {
		errs = append(errs, err)
	}
	o.layout = abs
	if err := o.render.Complete(); err != nil {
		errs = append(errs, err)
	}
	kube := o.kubeSource()
	switch {
	case o.sourceDir != "" && kube:
		errs = append(errs, errors.New("--source-dir cannot be combined with the Kubernetes source flags"))
	case o.sourceDir == "" && !kube:
		errs = append(errs, errors.New("no configuration source: give --source-dir, or --namespace with --configmaps/--secrets"))
	case kube && o.namespace == "":
		errs = append(errs, errors.New("--namespace is required with the Kubernetes source"))
	case kube && len(o.configMaps)+len(o.secrets)+len(o.optionalConfigMaps)+len(o.optionalSecrets) == 0:
		errs = append(errs, errors.New("no objects to read: give --configmaps, --secrets or their optional forms"))
	}
	if (kube || o.kubeconfig != "") && o.nodeName == "" {
		errs = append(errs, errors.New("--node-name is required with the Kubernetes API (no hostname found)"))
	}
	if o.revision < 0 {
		errs = append(errs, fmt.Errorf("invalid --revision %d", o.revision))
	}
	if o.revisionedNames && (!kube || o.revision == 0) {
		errs = append(errs, errors.New("--revisioned-names needs the Kubernetes source and --revision: the names read are <name>-<revision>"))
	}
	if err := checkProxyListeners(o.render.ProxyArgs); err != nil {
		errs = append(errs, err)
	}
	if o.lockTimeout < 0 || o.retryTimeout <= 0 {
		errs = append(errs, errors.New("--lock-timeout and --retry-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// kubeSource reports whether the configuration is read from Kubernetes.
// --kubeconfig alone does not choose it: with --source-dir it only enables
// Events.
func (o *installOptions) kubeSource() bool {
	return o.namespace != "" || len(o.configMaps)+len(o.secrets)+len(o.optionalConfigMaps)+len(o.optionalSecrets) > 0
}

// client returns a client from --kubeconfig, or from the default loading
// rules (KUBECONFIG, ~/.kube/config, in-cluster) when it is empty.
func (o *installOptions) client() (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	rc.UserAgent = "revgate-installer"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	return client, nil
}

func (o *installOptions) source(client kubernetes.Interface, log *slog.Logger) installer.Source {
	if o.sourceDir != "" {
		return &installer.LocalSource{Dir: o.sourceDir, Logger: log}
	}
	src := &installer.KubeSource{
		Logger:             log,
		Client:             client,
		Namespace:          o.namespace,
		ConfigMaps:         o.configMaps,
		Secrets:            o.secrets,
		OptionalConfigMaps: o.optionalConfigMaps,
		OptionalSecrets:    o.optionalSecrets,
		RetryTimeout:       o.retryTimeout,
	}
	if o.revisionedNames {
		src.Revision = o.revision
	}
	return src
}

// validationOptions are the proxy's configuration options as the rendered
// proxy command will set them through --proxy-arg (--ingress-class,
// --namespace, --root-namespaces, --fallback), so that validation judges the
// configuration as the proxy will. Other arguments are ignored; arguments that
// do not parse (a test may hand the proxy a bad flag on purpose) leave the
// defaults, and the monitor judges what the proxy makes of them.
func validationOptions(proxyArgs []string) config.Options {
	opts, _, _ := parseProxyArgs(proxyArgs)
	return opts
}

// checkProxyListeners refuses proxy arguments whose listeners share an
// address: that would be a crash loop (or, worse, mixed answers) on the
// node, so no command renders such a proxy pod.
func checkProxyListeners(proxyArgs []string) error {
	if _, listeners, ok := parseProxyArgs(proxyArgs); ok {
		if err := listeners.Validate(); err != nil {
			return fmt.Errorf("--proxy-arg: %w", err)
		}
	}
	return nil
}

// parseProxyArgs reads the configuration and listener flags out of the
// rendered proxy's arguments; ok is false (and the defaults are returned)
// when they do not parse.
func parseProxyArgs(proxyArgs []string) (opts config.Options, listeners server.ListenerFlags, ok bool) {
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	opts.AddFlags(fs)
	listeners.AddFlags(fs)
	if err := fs.Parse(proxyArgs); err != nil {
		opts, listeners = config.Options{}, server.ListenerFlags{}
		defaults := pflag.NewFlagSet("defaults", pflag.ContinueOnError)
		opts.AddFlags(defaults)
		listeners.AddFlags(defaults)
		return opts, listeners, false
	}
	opts.Dirs, opts.LastKnownGoodDir = nil, ""
	return opts, listeners, true
}

// gatewayValidator checks a staged configuration with the same loader and
// translator the proxy uses: problems of severity error refuse it, warnings
// are returned.
func gatewayValidator(opts config.Options) installer.Validator {
	return installer.ValidatorFunc(func(_ context.Context, dir string) ([]string, error) {
		opts := opts
		opts.Dirs = []string{dir}
		problems, err := config.Validate(opts)
		if err != nil {
			return nil, fmt.Errorf("validate configuration: %w", err)
		}
		var warnings, errs []string
		for _, p := range problems {
			// Name files as they will be in the revision, not in the temp copy.
			msg := strings.ReplaceAll(p.String(), dir+string(filepath.Separator), "")
			if p.Severity == model.SeverityError {
				errs = append(errs, msg)
			} else {
				warnings = append(warnings, msg)
			}
		}
		if len(errs) > 0 {
			return warnings, fmt.Errorf("%d error(s):\n  %s", len(errs), strings.Join(errs, "\n  "))
		}
		return warnings, nil
	})
}

func (o *installOptions) run(ctx context.Context, w io.Writer) error {
	log := logging.New(nil, slog.LevelInfo)
	var client kubernetes.Interface
	if o.kubeSource() || o.kubeconfig != "" {
		var err error
		if client, err = o.client(); err != nil {
			return err
		}
	}
	in := &installer.Installer{
		Layout:      o.layout,
		Source:      o.source(client, log),
		Validator:   gatewayValidator(validationOptions(o.render.ProxyArgs)),
		Strict:      o.strict,
		Render:      o.render,
		Revision:    o.revision,
		LockTimeout: o.lockTimeout,
		NoPublish:   o.noPublish,
		Logger:      log,
	}
	if client != nil {
		// Events go on the operand's mirror pod, <pod name>-<node name>, the
		// object the monitor records its Events on too.
		in.PodEvents = &monitor.NodeMirrorPods{Client: client, Namespace: installer.PodNamespace, Node: o.nodeName}
	}
	if d, err := time.ParseDuration(os.Getenv(stepDelayEnv)); err == nil && d > 0 {
		in.AfterStep = func(string) { time.Sleep(d) }
	}
	res, err := in.Run(ctx)
	if err != nil {
		return err
	}
	for _, warn := range res.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
	state := "published"
	if !res.Published {
		state = "written, not published"
	}
	where := ""
	if res.Slot != "" {
		where = fmt.Sprintf(" (slot %s, pod %s)", res.Slot, res.PodName)
	}
	fmt.Fprintf(w, "revision %d %s: %s%s\n", res.Revision, state, res.Dir, where)
	return nil
}

func newInstallCommand() *cobra.Command {
	o := &installOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write a new revision of the gateway configuration and publish its static pods",
		Long: `Install validates a configuration, writes it as revision N (default: the
highest installed + 1) under <resource-dir>/<target>-pod-<N>/ together with the
rendered operand and startup-monitor static-pod manifests, and publishes both
manifests into the manifests dir. Everything happens under the target's lock;
a crash at any point leaves the previous state or the complete new revision.

For OpenShift-style command lines, --pod-manifest-dir and
--pod-manifests-lock-file are accepted for --manifests-dir and --lock-file,
--node-name defaults to $NODE_NAME, and --revisioned-names reads the
revisioned copies <name>-<revision> of the ConfigMaps and Secrets.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.addFlags(cmd)
	return cmd
}

func init() { rootCmd.AddCommand(newInstallCommand()) }
