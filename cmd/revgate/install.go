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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/cmdline"
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

// installOptions are the flags of `revgate install`; validate completes
// layout and render from them.
type installOptions struct {
	cmdline.Install
	layout revisions.Layout
	render installer.RenderOptions
}

// renderOptions are the installer's rendering options as the flags of r say.
func renderOptions(r cmdline.Render) installer.RenderOptions {
	return installer.RenderOptions{
		Binary:            r.Binary,
		Image:             r.Image,
		ImagePullPolicy:   corev1.PullPolicy(r.ImagePullPolicy),
		ProxyArgs:         r.ProxyArgs,
		MonitorArgs:       r.MonitorArgs,
		MonitorKubeconfig: r.MonitorKubeconfig,
		Publish:           revisions.PublishMode(r.Publish),
		EndpointsFile:     r.EndpointsFile,
	}
}

func (o *installOptions) validate() error {
	o.layout = revisions.Layout(o.Layout).Defaulted()
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
	o.render = renderOptions(o.Render)
	if err := o.render.Complete(); err != nil {
		errs = append(errs, err)
	}
	kube := o.kubeSource()
	switch {
	case o.SourceDir != "" && kube:
		errs = append(errs, errors.New("--source-dir cannot be combined with the Kubernetes source flags"))
	case o.SourceDir == "" && !kube:
		errs = append(errs, errors.New("no configuration source: give --source-dir, or --namespace with --configmaps/--secrets"))
	case kube && o.Namespace == "":
		errs = append(errs, errors.New("--namespace is required with the Kubernetes source"))
	case kube && len(o.ConfigMaps)+len(o.Secrets)+len(o.OptionalConfigMaps)+len(o.OptionalSecrets) == 0:
		errs = append(errs, errors.New("no objects to read: give --configmaps, --secrets or their optional forms"))
	}
	if (kube || o.Kubeconfig != "") && o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required with the Kubernetes API (no hostname found)"))
	}
	if o.Revision < 0 {
		errs = append(errs, fmt.Errorf("invalid --revision %d", o.Revision))
	}
	if o.RevisionedNames && (!kube || o.Revision == 0) {
		errs = append(errs, errors.New("--revisioned-names needs the Kubernetes source and --revision: the names read are <name>-<revision>"))
	}
	if err := checkProxyListeners(o.render.ProxyArgs); err != nil {
		errs = append(errs, err)
	}
	if o.LockTimeout < 0 || o.RetryTimeout <= 0 {
		errs = append(errs, errors.New("--lock-timeout and --retry-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// kubeSource reports whether the configuration is read from Kubernetes.
// --kubeconfig alone does not choose it: with --source-dir it only enables
// Events.
func (o *installOptions) kubeSource() bool {
	return o.Namespace != "" || len(o.ConfigMaps)+len(o.Secrets)+len(o.OptionalConfigMaps)+len(o.OptionalSecrets) > 0
}

// client returns a client from --kubeconfig, or from the default loading
// rules (KUBECONFIG, ~/.kube/config, in-cluster) when it is empty.
func (o *installOptions) client() (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
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
	if o.SourceDir != "" {
		return &installer.LocalSource{Dir: o.SourceDir, Logger: log}
	}
	src := &installer.KubeSource{
		Logger:             log,
		Client:             client,
		Namespace:          o.Namespace,
		ConfigMaps:         o.ConfigMaps,
		Secrets:            o.Secrets,
		OptionalConfigMaps: o.OptionalConfigMaps,
		OptionalSecrets:    o.OptionalSecrets,
		RetryTimeout:       o.RetryTimeout,
	}
	if o.RevisionedNames {
		src.Revision = o.Revision
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
	c, _, _ := parseProxyArgs(proxyArgs)
	opts := configOptions(c)
	opts.Dirs, opts.LastKnownGoodDir = nil, ""
	return opts
}

// checkProxyListeners refuses proxy arguments whose listeners share an
// address: that would be a crash loop (or, worse, mixed answers) on the
// node, so no command renders such a proxy pod.
func checkProxyListeners(proxyArgs []string) error {
	if _, listeners, ok := parseProxyArgs(proxyArgs); ok {
		if err := server.ListenerFlags(listeners).Validate(); err != nil {
			return fmt.Errorf("--proxy-arg: %w", err)
		}
	}
	return nil
}

// parseProxyArgs reads the configuration and listener flags out of the
// rendered proxy's arguments; ok is false (and the defaults are returned)
// when they do not parse.
func parseProxyArgs(proxyArgs []string) (c cmdline.Config, l cmdline.Listeners, ok bool) {
	if err := cmdline.ParseProxyPart(proxyArgs, &c, &l); err != nil {
		d := cmdline.NewProxy()
		return d.Config, d.Listeners, false
	}
	return c, l, true
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
	if o.kubeSource() || o.Kubeconfig != "" {
		var err error
		if client, err = o.client(); err != nil {
			return err
		}
	}
	in := &installer.Installer{
		Layout:      o.layout,
		Source:      o.source(client, log),
		Validator:   gatewayValidator(validationOptions(o.render.ProxyArgs)),
		Strict:      o.Strict,
		Render:      o.render,
		Revision:    o.Revision,
		LockTimeout: o.LockTimeout,
		NoPublish:   o.NoPublish,
		Logger:      log,
	}
	if client != nil {
		// Events go on the operand's mirror pod, <pod name>-<node name>, the
		// object the monitor records its Events on too.
		in.PodEvents = &monitor.NodeMirrorPods{Client: client, Namespace: installer.PodNamespace, Node: o.NodeName}
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
		Use:   cmdline.InstallCommand,
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
	o.AddFlags(cmd.Flags())
	return cmd
}

func init() { rootCmd.AddCommand(newInstallCommand()) }
