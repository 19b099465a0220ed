package installer

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/internal/rawflag"
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
	// AdminHost and AdminPort are where the probes reach the gateway's admin
	// listener by default (its default address); a --admin-addr among the
	// proxy arguments moves them.
	AdminHost = "127.0.0.1"
	AdminPort = 9901
	// adminAddrFlag is the proxy's flag for its admin listener.
	adminAddrFlag = "admin-addr"
)

// AdminEndpoint returns where the probes reach the admin listener of a proxy
// started with args: the last --admin-addr (as the proxy's flag parsing
// takes the last), an unspecified or wildcard host becoming 127.0.0.1. It
// returns the defaults and given false when no usable --admin-addr is given.
func AdminEndpoint(args []string) (host string, port int, given bool) {
	host, port = AdminHost, AdminPort
	v, ok := rawflag.Last(args, adminAddrFlag)
	if !ok {
		return host, port, false
	}
	h, p, err := net.SplitHostPort(v)
	if err != nil {
		return host, port, false
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		return host, port, false
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = AdminHost
	}
	return h, n, true
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
	return o
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
	cmd := []string{o.Binary, "proxy",
		"--config-dir=" + l.RevisionDir(rev),
		"--revision=" + strconv.Itoa(rev),
		"--termination-log=" + l.TerminationLog,
	}
	if o.EndpointsFile != "" {
		m.add("live-endpoints", filepath.Dir(o.EndpointsFile), true, corev1.HostPathDirectoryOrCreate)
		cmd = append(cmd, "--endpoints-file="+o.EndpointsFile)
	}
	cmd = append(cmd, o.ProxyArgs...)
	adminHost, adminPort, _ := AdminEndpoint(o.ProxyArgs)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Volumes = m.volumes
	pod.Spec.Containers = []corev1.Container{{
		Name:                     "proxy",
		Image:                    o.Image,
		ImagePullPolicy:          o.ImagePullPolicy,
		Command:                  cmd,
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
	cmd := []string{o.Binary, "monitor",
		"--revision=" + strconv.Itoa(rev),
		"--target=" + l.Target,
		"--resource-dir=" + l.ResourceDir,
		"--manifests-dir=" + l.ManifestsDir,
		"--lock-file=" + l.LockFile,
		"--termination-log=" + l.TerminationLog,
	}
	// A proxy moved to another admin address is checked there; monitor
	// arguments given explicitly come later and win.
	if host, port, given := AdminEndpoint(o.ProxyArgs); given {
		base := "http://" + net.JoinHostPort(host, strconv.Itoa(port))
		cmd = append(cmd, "--healthz-url="+base+"/healthz", "--readyz-url="+base+"/readyz")
	}
	if o.MonitorKubeconfig != "" {
		m.add("kubeconfig", o.MonitorKubeconfig, true, corev1.HostPathFile)
		cmd = append(cmd, "--kubeconfig="+o.MonitorKubeconfig)
	}
	cmd = append(cmd, o.MonitorArgs...)
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

// Marshal renders a pod as YAML.
func Marshal(pod *corev1.Pod) ([]byte, error) {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("render pod %s: %w", pod.Name, err)
	}
	return data, nil
}
