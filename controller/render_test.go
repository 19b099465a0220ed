package controller

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/testcert"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// mapCache is a Cache over plain slices, for the rendering rules alone; the
// informer-backed cache is tested against the API server.
type mapCache struct {
	classes   []*networkingv1.IngressClass
	ingresses []*networkingv1.Ingress
	irs       []*unstructured.Unstructured
	services  []*corev1.Service
	slices    []*discoveryv1.EndpointSlice
	secrets   []*corev1.Secret
}

func (m *mapCache) IngressClasses() []*networkingv1.IngressClass {
	return append([]*networkingv1.IngressClass(nil), m.classes...)
}
func (m *mapCache) Ingresses() []*networkingv1.Ingress {
	return append([]*networkingv1.Ingress(nil), m.ingresses...)
}
func (m *mapCache) IngressRoutes() []*unstructured.Unstructured {
	return append([]*unstructured.Unstructured(nil), m.irs...)
}
func (m *mapCache) Service(ns, name string) *corev1.Service {
	for _, s := range m.services {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}
func (m *mapCache) EndpointSlices(ns, svc string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, s := range m.slices {
		if s.Namespace == ns && s.Labels[labelServiceName] == svc {
			out = append(out, s)
		}
	}
	return out
}
func (m *mapCache) Secret(ns, name string) *corev1.Secret {
	for _, s := range m.secrets {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

var created = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

// churn is what the API server adds to every object and the rendering
// must drop.
func churn(m *metav1.ObjectMeta, rv string) {
	m.ResourceVersion = rv
	m.UID = types.UID("uid-" + m.Name + "-" + rv)
	m.Generation = 7
	m.CreationTimestamp = created
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "x", UID: "u"}}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[annotationLastApplied] = `{"rv":"` + rv + `"}`
}

func ingressObj(ns, name, class, host, svc string, tlsSecret string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
	if class != "" {
		ing.Spec.IngressClassName = &class
	}
	if tlsSecret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: tlsSecret}}
	}
	return ing
}

func serviceObj(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.10",
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
}

func sliceObj(ns, name, svc string, addrs ...string) *discoveryv1.EndpointSlice {
	port, pname := int32(8080), "http"
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{labelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port}},
	}
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{a},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + a, UID: "pod-uid", ResourceVersion: "99"},
		})
	}
	return sl
}

func ingressRouteObj(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "contour.heptio.com/v1beta1",
		"kind":       "IngressRoute",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
	return u
}

// cluster is a small cluster: two classes (one of revgate's), an Ingress
// of each class, an IngressRoute with a canary and TLS, Services, slices
// and Secrets, some named by nothing that is served.
func cluster(rv string) *mapCache {
	ours := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "revgate"}, Spec: networkingv1.IngressClassSpec{Controller: config.ControllerName}}
	nginx := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
	web := ingressObj("shop", "web", "revgate", "shop.example", "web", "shop-tls")
	other := ingressObj("shop", "legacy", "nginx", "legacy.example", "legacy", "")
	ir := ingressRouteObj("blog", "root", map[string]any{
		"virtualhost": map[string]any{"fqdn": "blog.example", "tls": map[string]any{"secretName": "blog-tls"}},
		"routes": []any{map[string]any{
			"match":    "/",
			"services": []any{map[string]any{"name": "blog", "port": int64(80)}},
			"canary":   map[string]any{"service": map[string]any{"name": "blog-next", "port": int64(80)}, "percentage": int64(10)},
		}},
	})
	ir.Object["status"] = map[string]any{"currentStatus": "valid", "description": "rv " + rv}
	tls := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": []byte("CERT " + name), "tls.key": []byte("KEY " + name)}}
	}
	c := &mapCache{
		classes:   []*networkingv1.IngressClass{nginx, ours},
		ingresses: []*networkingv1.Ingress{other, web},
		irs:       []*unstructured.Unstructured{ir},
		services:  []*corev1.Service{serviceObj("shop", "web"), serviceObj("shop", "legacy"), serviceObj("blog", "blog"), serviceObj("blog", "blog-next"), serviceObj("blog", "unused")},
		slices: []*discoveryv1.EndpointSlice{
			sliceObj("shop", "web-abc", "web", "10.0.0.2", "10.0.0.1"),
			sliceObj("shop", "legacy-1", "legacy", "10.0.1.1"),
			sliceObj("blog", "blog-1", "blog", "10.0.2.1"),
		},
		secrets: []*corev1.Secret{tls("shop", "shop-tls"), tls("blog", "blog-tls"), tls("blog", "other-tls")},
	}
	for _, o := range c.classes {
		churn(&o.ObjectMeta, rv)
	}
	for _, o := range c.ingresses {
		churn(&o.ObjectMeta, rv)
		o.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2." + rv}}
	}
	for _, o := range c.services {
		churn(&o.ObjectMeta, rv)
	}
	for _, o := range c.slices {
		churn(&o.ObjectMeta, rv)
		o.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] = rv
	}
	for _, o := range c.secrets {
		churn(&o.ObjectMeta, rv)
	}
	ir.SetResourceVersion(rv)
	ir.SetUID(types.UID("uid-" + rv))
	ir.SetGeneration(3)
	ir.SetCreationTimestamp(created)
	ir.SetAnnotations(map[string]string{annotationLastApplied: rv})
	return c
}

func selectAndRender(t *testing.T, r *renderer, c Cache) (*Selection, *Snapshot) {
	t.Helper()
	sel := selectObjects(config.Options{IngressClass: "revgate"}, c)
	snap, err := r.render(&sel.Objects)
	if err != nil {
		t.Fatal(err)
	}
	return sel, snap
}

// The golden files are the revision source of the small cluster: what is
// served, one file per object, without churn.
func TestRenderGolden(t *testing.T) {
	_, snap := selectAndRender(t, &renderer{}, cluster("1"))
	got := map[string][]byte{}
	for _, f := range configFiles(snap.Config) {
		got[f.rel] = f.data
	}
	golden := filepath.Join("testdata", "snapshot")
	if *update {
		if err := os.RemoveAll(golden); err != nil {
			t.Fatal(err)
		}
		for rel, data := range got {
			p := filepath.Join(golden, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want, err := revisionFiles(revisions.OS(), golden)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		var names []string
		for rel := range got {
			names = append(names, rel)
		}
		t.Fatalf("rendered %d files, golden has %d (go test ./controller -run Golden -update): %v", len(got), len(want), names)
	}
	for _, f := range want {
		if string(got[f.rel]) != string(f.data) {
			t.Errorf("%s differs from the golden file:\n%s", f.rel, got[f.rel])
		}
	}
	for rel, data := range got {
		for _, bad := range []string{"resourceVersion", "uid", "managedFields", "generation", "ownerReferences", "last-applied", "status", "192.0.2.", "1.2.3.4", "last-change-trigger-time"} {
			if strings.Contains(string(data), bad) {
				t.Errorf("%s holds churn %q:\n%s", rel, bad, data)
			}
		}
	}
}

// The same cluster state renders the same bytes whatever its churn, the
// order objects come in, and whether the renderer's cache is warm.
func TestRenderDeterministic(t *testing.T) {
	warm := &renderer{}
	_, a := selectAndRender(t, warm, cluster("1"))
	shuffled := cluster("2")
	for i, j := 0, len(shuffled.services)-1; i < j; i, j = i+1, j-1 {
		shuffled.services[i], shuffled.services[j] = shuffled.services[j], shuffled.services[i]
	}
	sl := shuffled.slices[0]
	sl.Endpoints[0], sl.Endpoints[1] = sl.Endpoints[1], sl.Endpoints[0]
	for name, r := range map[string]*renderer{"cold": {}, "warm": warm} {
		_, b := selectAndRender(t, r, shuffled)
		if a.Digest != b.Digest || !reflect.DeepEqual(a.Config, b.Config) || !reflect.DeepEqual(a.Slices, b.Slices) {
			t.Fatalf("%s renderer: churn changed the snapshot", name)
		}
	}
}

func TestDigest(t *testing.T) {
	r := &renderer{}
	_, base := selectAndRender(t, r, cluster("1"))
	tests := []struct {
		name    string
		edit    func(c *mapCache)
		changed bool
	}{
		{name: "an endpoint added", edit: func(c *mapCache) {
			c.slices[0].Endpoints = append(c.slices[0].Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.9"}})
			c.slices[0].ResourceVersion = "3"
		}},
		{name: "a slice of a served Service added", edit: func(c *mapCache) {
			c.slices = append(c.slices, sliceObj("shop", "web-def", "web", "10.0.0.7"))
		}},
		{name: "an Ingress of another class edited", edit: func(c *mapCache) {
			c.ingresses[0].Spec.Rules[0].Host = "other.example"
			c.ingresses[0].ResourceVersion = "3"
		}},
		{name: "a Service named by nothing edited", edit: func(c *mapCache) {
			c.services[4].Spec.Ports[0].Port = 81
			c.services[4].ResourceVersion = "3"
		}},
		{name: "a served Ingress's host edited", changed: true, edit: func(c *mapCache) {
			c.ingresses[1].Spec.Rules[0].Host = "www.shop.example"
			c.ingresses[1].ResourceVersion = "3"
		}},
		{name: "a served Service's port edited", changed: true, edit: func(c *mapCache) {
			c.services[0].Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
			c.services[0].ResourceVersion = "3"
		}},
		{name: "a served certificate renewed", changed: true, edit: func(c *mapCache) {
			c.secrets[0].Data["tls.crt"] = []byte("NEW CERT")
			c.secrets[0].ResourceVersion = "3"
		}},
		{name: "an IngressRoute's weight edited", changed: true, edit: func(c *mapCache) {
			svc := c.irs[0].Object["spec"].(map[string]any)["routes"].([]any)[0].(map[string]any)["services"].([]any)[0].(map[string]any)
			svc["weight"] = int64(5)
			c.irs[0].SetResourceVersion("3")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster("1")
			tt.edit(c)
			_, snap := selectAndRender(t, r, c)
			if (snap.Digest != base.Digest) != tt.changed {
				t.Fatalf("digest changed: %v, want %v", snap.Digest != base.Digest, tt.changed)
			}
		})
	}
}

// Secrets are rendered under secrets/, which the installer writes 0600,
// with their namespace, and the gateway loads them from there.
func TestRenderedSecretsAreSecretFiles(t *testing.T) {
	_, snap := selectAndRender(t, &renderer{}, cluster("1"))
	if len(snap.Config.Secrets[config.SecretObjectsFolder]) != 2 {
		t.Fatalf("secrets %v", snap.Config.Secrets)
	}
	for _, f := range configFiles(snap.Config) {
		if strings.Contains(string(f.data), "kind: Secret") != strings.HasPrefix(f.rel, installer.SecretsDir+"/") {
			t.Errorf("%s: a Secret must be under secrets/ and nothing else", f.rel)
		}
	}
}

func TestSelect(t *testing.T) {
	sel, _ := selectAndRender(t, &renderer{}, cluster("1"))
	names := func(objs []named) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
		return out
	}
	asNamed := func(n int, get func(i int) named) []named {
		out := make([]named, n)
		for i := range out {
			out[i] = get(i)
		}
		return out
	}
	for _, tt := range []struct {
		kind string
		got  []string
		want []string
	}{
		{"IngressClass", names(asNamed(len(sel.IngressClasses), func(i int) named { return sel.IngressClasses[i] })), []string{"/revgate"}},
		{"Ingress", names(asNamed(len(sel.Ingresses), func(i int) named { return sel.Ingresses[i] })), []string{"shop/web"}},
		{"IngressRoute", names(asNamed(len(sel.IngressRoutes), func(i int) named { return sel.IngressRoutes[i] })), []string{"blog/root"}},
		{"Service", names(asNamed(len(sel.Services), func(i int) named { return sel.Services[i] })), []string{"blog/blog", "blog/blog-next", "shop/web"}},
		{"EndpointSlice", names(asNamed(len(sel.EndpointSlices), func(i int) named { return sel.EndpointSlices[i] })), []string{"blog/blog-1", "shop/web-abc"}},
		{"Secret", names(asNamed(len(sel.Secrets), func(i int) named { return sel.Secrets[i] })), []string{"blog/blog-tls", "shop/shop-tls"}},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Fatalf("selected %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// The rendered source is what the gateway loads: installed as a revision
// folder, it translates without problems, with every selected object.
func TestRenderedSnapshotLoads(t *testing.T) {
	c := cluster("1")
	// Real certificates, so that the TLS Secrets translate.
	for _, s := range c.secrets {
		crt, key := testcert.MustPEM(t, "shop.example", "blog.example")
		s.Data = map[string][]byte{"tls.crt": crt, "tls.key": key}
	}
	_, snap := selectAndRender(t, &renderer{}, c)
	dir := filepath.Join(t.TempDir(), "revgate-pod-1")
	for _, f := range configFiles(snap.Config) {
		p := filepath.Join(dir, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	built, err := config.Build(config.Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range built.Problems {
		t.Errorf("problem: %s", p)
	}
	for _, o := range built.Objects {
		if o.Status != model.StatusValid {
			t.Errorf("%s: %s %s", o.Object, o.Status, o.Description)
		}
	}
	if len(built.Objects) != 10 || len(built.Routes) != 2 || len(built.Certificates) != 2 {
		t.Fatalf("objects %d routes %d certificates %d", len(built.Objects), len(built.Routes), len(built.Certificates))
	}
}
