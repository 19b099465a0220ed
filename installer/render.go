package installer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/revisions"
)

// Defaults of the rendered manifests.
const (
	// DefaultImage is the container image of both pods.
	DefaultImage = "revgate:latest"
	// DefaultImagePullPolicy of both pods.
	DefaultImagePullPolicy = corev1.PullIfNotPresent
	// PodNamespace is the namespace of the static pods. kube-system is the
	// namespace of node-level static pods on every Kubernetes distribution;
	// the mirror pods appear there.
	PodNamespace = "kube-system"
)

// adminEndpoint returns where the probes and the monitor reach the admin
// listener of a proxy started with args: its --admin-addr as the proxy
// reads it, an unspecified or wildcard host becoming 127.0.0.1; the
// proxy's default address when that is unusable (or empty: no admin
// listener, nothing to probe elsewhere).
func adminEndpoint(args []string) (host string, port int) {
	var l cmdline.Listeners
	// Arguments that do not parse are the proxy's to fail on; its admin
	// address is read all the same.
	_ = cmdline.ParseProxyPart(args, &l)
	if host, port, ok := cmdline.LocalEndpoint(l.Admin); ok {
		return host, port
	}
	host, port, _ = cmdline.LocalEndpoint(cmdline.NewProxy().Admin)
	return host, port
}

// RenderOptions say what the rendered pods run.
type RenderOptions struct {
	// Binary is the revgate binary in the pods' commands (required).
	Binary string
	// Image of both pods; default DefaultImage.
	Image string
	// ImagePullPolicy of both pods; default IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// ProxyArgs and MonitorArgs are appended to the two commands.
	ProxyArgs, MonitorArgs []string
	// MonitorKubeconfig, when set, is a kubeconfig file on the node that the
	// monitor uses to check the mirror pod and record Events; it is mounted
	// read-only into the monitor pod at the same path.
	MonitorKubeconfig string
	// Publish is how the revision is published; default
	// revisions.DefaultPublishMode (slots). The operand manifest is the same
	// in both modes; in slots mode the monitor is told so with --publish,
	// and in replace mode its command is the one it always was.
	Publish revisions.PublishMode
	// EndpointsFile, when set, is the live endpoints file the proxy follows
	// (--endpoints-file; by default a writer uses Layout.EndpointsFile()).
	// Its folder is mounted read-only into the operand pod, created when
	// missing: a mount of the file itself would keep the old file after the
	// writer renames a new one over it. Empty (the default): the proxy
	// serves the revision's endpoints only.
	EndpointsFile string
}

func (o RenderOptions) defaulted() RenderOptions {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = DefaultImagePullPolicy
	}
	if o.Publish == "" {
		o.Publish = revisions.DefaultPublishMode
	}
	return o
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

// MonitorPodSuffix is appended to the target for the monitor pod's name.
const MonitorPodSuffix = "-startup-monitor"

// mounts collects hostPath volumes, one per distinct path, each mounted at
// the same path inside the container so that paths mean the same inside and
// outside (revgate supervise runs the commands as host processes).
type mounts struct {
	volumes []corev1.Volume
	mounts  []corev1.VolumeMount
	seen    map[string]bool
}

func (m *mounts) add(name, path string, readOnly bool, typ corev1.HostPathType) {
	path = filepath.Clean(path)
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	if m.seen[path] {
		return
	}
	m.seen[path] = true
	t := typ
	m.volumes = append(m.volumes, corev1.Volume{
		Name:         name,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}},
	})
	m.mounts = append(m.mounts, corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: readOnly})
}

func basePod(name string, labels map[string]string, installedAt time.Time) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   PodNamespace,
			Labels:      labels,
			Annotations: map[string]string{revisions.AnnotationInstalledAt: installedAt.UTC().Format(time.RFC3339)},
		},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			PriorityClassName:             "system-node-critical",
			TerminationGracePeriodSeconds: &grace,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
}

func requests(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
	}}
}

func httpProbe(host string, port int, path string, period, failures, initialDelay int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: host, Port: intstr.FromInt(port), Path: path, Scheme: corev1.URISchemeHTTP,
		}},
		InitialDelaySeconds: initialDelay,
		PeriodSeconds:       period,
		FailureThreshold:    failures,
		TimeoutSeconds:      1,
		SuccessThreshold:    1,
	}
}

// OperandPod renders the operand static pod of revision rev: pod <t> running
// `revgate proxy` on the revision folder.
func OperandPod(l revisions.Layout, rev int, o RenderOptions, installedAt time.Time) *corev1.Pod {
	o = o.defaulted()
	pod := basePod(l.Target, map[string]string{"app": l.Target, revisions.RevisionLabel: strconv.Itoa(rev)}, installedAt)
	var m mounts
	m.add("resources", l.RevisionDir(rev), true, corev1.HostPathDirectory)
	m.add("log", filepath.Dir(l.TerminationLog), false, corev1.HostPathDirectoryOrCreate)
	if o.EndpointsFile != "" {
		m.add("live-endpoints", filepath.Dir(o.EndpointsFile), true, corev1.HostPathDirectoryOrCreate)
	}
	args := proxyArgs(l, rev, o)
	adminHost, adminPort := adminEndpoint(args)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Volumes = m.volumes
	pod.Spec.Containers = []corev1.Container{{
		Name:                     "proxy",
		Image:                    o.Image,
		ImagePullPolicy:          o.ImagePullPolicy,
		Command:                  append([]string{o.Binary, cmdline.ProxyCommand}, args...),
		Resources:                requests("100m", "64Mi"),
		ReadinessProbe:           httpProbe(adminHost, adminPort, "/readyz", 1, 3, 0),
		LivenessProbe:            httpProbe(adminHost, adminPort, "/livez", 10, 6, 30),
		VolumeMounts:             m.mounts,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}
	return pod
}

// MonitorPod renders the startup-monitor static pod of revision rev: pod
// <t>-startup-monitor running `revgate monitor --revision=rev`.
func MonitorPod(l revisions.Layout, rev int, o RenderOptions, installedAt time.Time) *corev1.Pod {
	o = o.defaulted()
	pod := basePod(l.Target+MonitorPodSuffix, map[string]string{"app": l.Target + MonitorPodSuffix, revisions.RevisionLabel: strconv.Itoa(rev)}, installedAt)
	var m mounts
	m.add("resource-dir", l.ResourceDir, false, corev1.HostPathDirectoryOrCreate)
	m.add("manifests-dir", l.ManifestsDir, false, corev1.HostPathDirectoryOrCreate)
	m.add("lock-dir", filepath.Dir(l.LockFile), false, corev1.HostPathDirectoryOrCreate)
	m.add("log", filepath.Dir(l.TerminationLog), false, corev1.HostPathDirectoryOrCreate)
	if o.MonitorKubeconfig != "" {
		m.add("kubeconfig", o.MonitorKubeconfig, true, corev1.HostPathFile)
	}
	cmd := append([]string{o.Binary, cmdline.MonitorCommand}, monitorArgs(l, rev, o)...)
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod.Spec.Volumes = m.volumes
	pod.Spec.Containers = []corev1.Container{{
		Name:                     "monitor",
		Image:                    o.Image,
		ImagePullPolicy:          o.ImagePullPolicy,
		Command:                  cmd,
		Resources:                requests("10m", "32Mi"),
		VolumeMounts:             m.mounts,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}
	return pod
}

// proxyArgs are the arguments of the operand's proxy: its revision folder,
// revision, termination log and live endpoints file, then the free-form
// proxy arguments, which come last and so win.
func proxyArgs(l revisions.Layout, rev int, o RenderOptions) []string {
	p := cmdline.NewProxy()
	p.Dirs = []string{l.RevisionDir(rev)}
	p.Revision = rev
	p.TerminationLog = l.TerminationLog
	p.EndpointsFile = o.EndpointsFile
	return append(p.Args(), o.ProxyArgs...)
}

// monitorArgs are the arguments of the startup monitor of revision rev:
// the layout, the proxy's admin endpoint (where the operand's own
// arguments put it), the kubeconfig and the publish mode, then the
// free-form monitor arguments, which come last and so win.
func monitorArgs(l revisions.Layout, rev int, o RenderOptions) []string {
	m := cmdline.NewMonitor()
	m.Revision = rev
	m.Layout = cmdline.Layout(l)
	host, port := adminEndpoint(proxyArgs(l, rev, o))
	base := "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	m.HealthzURL, m.ReadyzURL = base+"/healthz", base+"/readyz"
	m.Kubeconfig = o.MonitorKubeconfig
	m.Publish = string(o.Publish)
	return append(m.Args(), o.MonitorArgs...)
}

// Marshal renders a pod as YAML.
func Marshal(pod *corev1.Pod) ([]byte, error) {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("render pod %s: %w", pod.Name, err)
	}
	return data, nil
}
