package demo

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Upstream is one demo upstream server: its name (the response body names
// it) and its listen address.
type Upstream struct {
	Name string
	Addr string
}

// DefaultUpstreams are the servers the example configuration points at.
var DefaultUpstreams = []Upstream{
	{Name: "upstream-1", Addr: "127.0.0.1:9081"},
	{Name: "upstream-2", Addr: "127.0.0.1:9082"},
}

// PodName is the name of the demo upstreams' static pod.
const PodName = "revgate-demo-upstreams"

// PodManifest renders a static pod running each upstream as a container
// `<binary> demo-upstream --listen ADDR --name NAME`, so that `revgate
// supervise` (or a kubelet) runs them beside the gateway.
func PodManifest(binary string, ups []Upstream) ([]byte, error) {
	grace := int64(5)
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: PodName, Namespace: "kube-system", Labels: map[string]string{"app": PodName}},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
		},
	}
	for _, u := range ups {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name:    u.Name,
			Image:   "revgate:latest",
			Command: []string{binary, "demo-upstream", "--listen=" + u.Addr, "--name=" + u.Name},
		})
	}
	data, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("render demo upstream pod: %w", err)
	}
	return data, nil
}
