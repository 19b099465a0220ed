package installer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/revisions"
)

// AddFlags registers the flags that say what the rendered pods run:
// --binary, --image, --image-pull-policy, --proxy-arg, --monitor-arg,
// --monitor-kubeconfig, --endpoints-file and --publish. Every command that installs
// revisions (revgate install, revgate controller) takes them alike.
func (o *RenderOptions) AddFlags(fs *pflag.FlagSet) {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = DefaultImagePullPolicy
	}
	fs.StringVar(&o.Binary, "binary", o.Binary, "revgate binary put into the rendered pods' commands (default: this executable)")
	fs.StringVar(&o.Image, "image", o.Image, "container image of the rendered pods")
	fs.Var(pullPolicyValue{&o.ImagePullPolicy}, "image-pull-policy", "image pull policy of the rendered pods: Always, IfNotPresent or Never")
	fs.StringArrayVar(&o.ProxyArgs, "proxy-arg", o.ProxyArgs, "extra argument appended to the rendered proxy command (repeatable)")
	fs.StringArrayVar(&o.MonitorArgs, "monitor-arg", o.MonitorArgs, "extra argument appended to the rendered monitor command (repeatable)")
	fs.StringVar(&o.MonitorKubeconfig, "monitor-kubeconfig", o.MonitorKubeconfig, "kubeconfig file on the node for the startup monitor (mirror-pod check, Events); mounted read-only into its pod")
	if o.Publish == "" {
		o.Publish = revisions.DefaultPublishMode
	}
	fs.Var(publishValue{&o.Publish}, "publish", "how the operand pod is published: slots (a second static pod beside the serving one, which is removed once the new one is good) or replace (over the one manifest <target>-pod.yaml; the kubelet stops the old pod before starting the new one)")
	fs.StringVar(&o.EndpointsFile, "endpoints-file", o.EndpointsFile, "live endpoints file the proxy follows (--endpoints-file; conventionally <resource-dir>/<target>-live/endpoints.json); its folder is mounted read-only into the proxy pod (empty: the revision's endpoints only)")
}

// pullPolicyValue adapts RenderOptions.ImagePullPolicy to pflag.Value; the
// value is checked by Complete, so that every flag error is reported at once.
type pullPolicyValue struct{ p *corev1.PullPolicy }

func (v pullPolicyValue) String() string { return string(*v.p) }
func (v pullPolicyValue) Type() string   { return "policy" }
func (v pullPolicyValue) Set(s string) error {
	*v.p = corev1.PullPolicy(s)
	return nil
}

// publishValue adapts RenderOptions.Publish to pflag.Value; checked by
// Complete.
type publishValue struct{ p *revisions.PublishMode }

func (v publishValue) String() string { return string(*v.p) }
func (v publishValue) Type() string   { return "mode" }
func (v publishValue) Set(s string) error {
	*v.p = revisions.PublishMode(s)
	return nil
}

// Complete checks the options and makes them usable in pods that do not run
// in this working folder: an empty Binary becomes this executable, and
// Binary, MonitorKubeconfig and EndpointsFile become absolute paths.
func (o *RenderOptions) Complete() error {
	var errs []error
	switch o.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		o.ImagePullPolicy = DefaultImagePullPolicy
	default:
		errs = append(errs, fmt.Errorf("invalid --image-pull-policy %q: want Always, IfNotPresent or Never", o.ImagePullPolicy))
	}
	if o.Publish == "" {
		o.Publish = revisions.DefaultPublishMode
	} else if _, err := revisions.ParsePublishMode(string(o.Publish)); err != nil {
		errs = append(errs, fmt.Errorf("--publish: %w", err))
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			errs = append(errs, fmt.Errorf("find this executable for --binary: %w", err))
		}
		o.Binary = exe
	}
	for _, p := range []*string{&o.Binary, &o.MonitorKubeconfig, &o.EndpointsFile} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			errs = append(errs, fmt.Errorf("make %q absolute: %w", *p, err))
			continue
		}
		*p = abs
	}
	return errors.Join(errs...)
}
