// Package e2etest holds what revgate's end-to-end suites (test/e2e under
// revgate supervise, test/e2e-node under a real kubelet) share: the gateway
// configuration they install, and the edits and publishing of revision
// manifests that stand in for what the installer would refuse to write.
package e2etest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/revisions"
)

// Config is a gateway configuration: every request goes to the Service "web"
// in namespace default, backed by one EndpointSlice per upstream address.
type Config struct {
	// Upstreams are the "host:port" addresses of the Service's endpoints.
	Upstreams []string
	// HealthCheck routes Host through an IngressRoute with an active health
	// check on /healthz each second, so that the gateway's readyz dependency
	// check sees dead upstreams; otherwise an Ingress routes every host.
	HealthCheck bool
	// Host is the IngressRoute's fqdn (HealthCheck only).
	Host string
	// Extra YAML documents are appended.
	Extra []string
}

// FileName is the file the configuration is written to in a source folder;
// the installer puts it into the revision as configmaps/config/<FileName>.
const FileName = "gateway.yaml"

// YAML renders the configuration as one multi-document YAML file.
func (c Config) YAML() (string, error) {
	var b strings.Builder
	b.WriteString(`apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: revgate
spec:
  controller: revgate.io/ingress-controller
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  ports:
  - name: http
    port: 80
`)
	if c.HealthCheck {
		fmt.Fprintf(&b, `---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata:
  name: web
  namespace: default
spec:
  virtualhost:
    fqdn: %s
  routes:
  - match: /
    services:
    - name: web
      port: 80
      healthCheck:
        path: /healthz
        intervalSeconds: 1
        timeoutSeconds: 1
        unhealthyThresholdCount: 1
        healthyThresholdCount: 1
`, c.Host)
	} else {
		b.WriteString(`---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: default
spec:
  ingressClassName: revgate
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
`)
	}
	slices, err := c.Slices()
	if err != nil {
		return "", err
	}
	for _, sl := range slices {
		doc, err := yaml.Marshal(sl)
		if err != nil {
			return "", err
		}
		b.WriteString("---\n")
		b.Write(doc)
	}
	for _, doc := range c.Extra {
		b.WriteString("---\n" + doc)
	}
	return b.String(), nil
}

// Slices are the EndpointSlices of the Service "web", one per upstream
// address (web-0, web-1, ...): in the revision's configuration, and what a
// live endpoints file holds for the same upstreams.
func (c Config) Slices() ([]discoveryv1.EndpointSlice, error) {
	out := make([]discoveryv1.EndpointSlice, 0, len(c.Upstreams))
	for i, addr := range c.Upstreams {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", addr, err)
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", addr, err)
		}
		name, num := "http", int32(n)
		out = append(out, discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "default",
				Labels: map[string]string{"kubernetes.io/service-name": "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &num}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}}},
		})
	}
	return out, nil
}

// Write writes the configuration into a new source folder and returns it.
func (c Config) Write(t testing.TB) string {
	t.Helper()
	cfg, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "source")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// BrokenIngress routes to a Service that does not exist: a broken object
// that --fallback=off refuses to serve around.
const BrokenIngress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: broken
  namespace: default
spec:
  ingressClassName: revgate
  rules:
  - host: broken.example
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: missing
            port:
              number: 80
`

// ReadPod parses a pod manifest.
func ReadPod(path string) (*corev1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return &pod, nil
}

// WritePod writes a pod manifest.
func WritePod(t testing.TB, path string, pod *corev1.Pod) {
	t.Helper()
	data, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Edit changes a revision folder after the installer wrote it, before it is
// published.
type Edit func(t *testing.T, revDir string)

// MutatePod edits the operand manifest <target>-pod.yaml of a revision folder.
func MutatePod(target string, edit func(*corev1.Pod)) Edit {
	return func(t *testing.T, revDir string) {
		t.Helper()
		path := filepath.Join(revDir, target+"-pod.yaml")
		pod, err := ReadPod(path)
		if err != nil {
			t.Fatal(err)
		}
		edit(pod)
		WritePod(t, path, pod)
	}
}

// AppendConfig appends a YAML document to the revision's configuration,
// behind the installer's validation.
func AppendConfig(doc string) Edit {
	return func(t *testing.T, revDir string) {
		t.Helper()
		path := filepath.Join(revDir, "configmaps", "config", FileName)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatalf("append to the revision's configuration: %v", err)
		}
		defer f.Close()
		if _, err := f.WriteString("---\n" + doc); err != nil {
			t.Fatal(err)
		}
	}
}

// Publish copies revision rev's manifests into the manifests dir, monitor
// first, each removed and then written, as the installer does.
func Publish(t testing.TB, l revisions.Layout, rev int) {
	t.Helper()
	fs := revisions.OS()
	for _, p := range [][2]string{
		{l.RevisionMonitorManifest(rev), l.PublishedMonitorManifest()},
		{l.RevisionPodManifest(rev), l.PublishedPodManifest()},
	} {
		data, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Publish(p[1], data); err != nil {
			t.Fatal(err)
		}
	}
}
