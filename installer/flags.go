package installer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/revisions"
)

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
