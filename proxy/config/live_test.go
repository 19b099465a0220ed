package config

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/revisions"
	"github.com/revgate/revgate/revisions/fsfault"
)

func ptr[T any](v T) *T { return &v }

// apiSlice is an EndpointSlice as the API server hands it out: with the
// bookkeeping that the endpoints file drops.
func apiSlice(ns, name, svc string, port int32, addrs ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:            map[string]string{labelServiceName: svc, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
			Annotations:       map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-02T03:04:05Z"},
			ResourceVersion:   "4711",
			UID:               types.UID("0b6f7f0e-" + name),
			Generation:        3,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc, UID: "svc-uid"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	return s
}

func TestEncodeEndpointsDeterministicAndClean(t *testing.T) {
	in := []discoveryv1.EndpointSlice{
		apiSlice("team-b", "web-x1", "web", 8080, "10.0.0.3"),
		apiSlice("default", "web-b", "web", 8080, "10.0.0.2", "10.0.0.1"),
		apiSlice("default", "web-a", "web", 8080),
		apiSlice("default", "api-z", "api", 9000, "127.0.0.1"),
	}
	want, err := EncodeEndpoints(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"resourceVersion", "uid", "generation", "managedFields", "creationTimestamp", "ownerReferences", "annotations", "last-change-trigger-time"} {
		if bytes.Contains(want, []byte(banned)) {
			t.Errorf("encoded file holds %q:\n%s", banned, want)
		}
	}
	// Items sorted by namespace, then name.
	var order []string
	out, err := DecodeEndpoints(want)
	if err != nil {
		t.Fatalf("decode own output: %v\n%s", err, want)
	}
	for _, s := range out {
		order = append(order, s.Namespace+"/"+s.Name)
	}
	if w := []string{"default/api-z", "default/web-a", "default/web-b", "team-b/web-x1"}; !reflect.DeepEqual(order, w) {
		t.Errorf("order %v, want %v", order, w)
	}
	// No endpoints is an empty list, not null; labels survive.
	if out[1].Endpoints == nil || len(out[1].Endpoints) != 0 {
		t.Errorf("slice without endpoints decoded as %#v", out[1].Endpoints)
	}
	if out[0].Labels[labelServiceName] != "api" || len(out[0].Labels) != 2 {
		t.Errorf("labels %v", out[0].Labels)
	}
	// The same state in another order, with other bookkeeping and nil
	// instead of empty, gives the same bytes.
	for i := 0; i < 20; i++ {
		sh := append([]discoveryv1.EndpointSlice(nil), in...)
		rand.Shuffle(len(sh), func(a, b int) { sh[a], sh[b] = sh[b], sh[a] })
		for j := range sh {
			sh[j].ResourceVersion = "9999"
			sh[j].UID = types.UID("other")
			sh[j].Annotations = nil
			if len(sh[j].Endpoints) == 0 {
				sh[j].Endpoints = []discoveryv1.Endpoint{}
			}
		}
		got, err := EncodeEndpoints(sh)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("shuffled input encodes differently:\n%s\nwant:\n%s", got, want)
		}
	}
	// Decoding and encoding again is the identity.
	again, err := EncodeEndpoints(out)
	if err != nil || !bytes.Equal(again, want) {
		t.Fatalf("round trip differs (%v):\n%s", err, again)
	}
	// The caller's slices are not modified.
	if in[0].ResourceVersion != "4711" || in[2].Endpoints != nil {
		t.Errorf("input modified: %+v", in[0].ObjectMeta)
	}
}

func TestDecodeEndpointsErrors(t *testing.T) {
	item := func(body string) string {
		return `{"apiVersion":"v1","kind":"List","items":[` + body + `]}`
	}
	good := `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-1","namespace":"default","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[{"addresses":["127.0.0.1"]}],"ports":[{"name":"http","port":8080}]}`
	withField := func(old, new string) string { return item(strings.Replace(good, old, new, 1)) }
	tests := []struct {
		name, data string
		// field and message fragments the error must hold.
		field, msg string
	}{
		{name: "not json", data: "{\n  \"apiVersion\": \"v1\",\n  nope\n}", msg: "line 3, column 3"},
		{name: "not a list", data: `{"apiVersion":"v1","kind":"ConfigMap"}`, msg: `kind "List"`},
		{name: "item of another kind", data: item(`{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"web","namespace":"default"}}`), field: "items[0]", msg: `got "v1" and "Endpoints"`},
		{name: "item of an old version", data: item(strings.Replace(good, "discovery.k8s.io/v1", "discovery.k8s.io/v1beta1", 1)), field: "items[0]", msg: "v1beta1"},
		{name: "no name", data: withField(`"name":"web-1",`, ""), field: "items[0].metadata.name", msg: "required"},
		{name: "no namespace", data: withField(`"namespace":"default",`, ""), field: "items[0].metadata.namespace", msg: "required"},
		{name: "duplicate", data: item(good + "," + good), field: "items[1]", msg: "same namespace and name as items[0]"},
		{name: "wrong type", data: withField(`"port":8080`, `"port":"http"`), field: "items[0]", msg: "ports.port"},
		{name: "bad address", data: withField(`"127.0.0.1"`, `"::1"`), field: "items[0].endpoints[0].addresses[0]", msg: `invalid IPv4 address "::1"`},
		{name: "no address", data: withField(`{"addresses":["127.0.0.1"]}`, `{"addresses":[]}`), field: "items[0].endpoints[0].addresses", msg: "no address"},
		{name: "address type", data: withField(`"IPv4"`, `"IPv5"`), field: "items[0].addressType", msg: "unsupported address type"},
		{name: "port range", data: withField(`"port":8080`, `"port":70000`), field: "items[0].ports[0].port", msg: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeEndpointsFile("/live/endpoints.json", []byte(tt.data))
			var ee *EndpointsError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T), want an *EndpointsError", err, err)
			}
			if ee.File != "/live/endpoints.json" || ee.Field != tt.field || !strings.Contains(ee.Message, tt.msg) {
				t.Fatalf("got file %q field %q message %q; want field %q and a message with %q", ee.File, ee.Field, ee.Message, tt.field, tt.msg)
			}
			if tt.field != "" && strings.Contains(tt.data, `"web-1"`) && ee.Object.Name != "web-1" {
				t.Errorf("error does not name the object: %v", ee)
			}
			if !strings.HasPrefix(err.Error(), "/live/endpoints.json: ") {
				t.Errorf("message %q does not start with the file", err)
			}
		})
	}
	t.Run("unknown fields ignored", func(t *testing.T) {
		out, err := DecodeEndpoints([]byte(withField(`"addressType"`, `"newField":{"x":1},"addressType"`)))
		if err != nil || len(out) != 1 {
			t.Fatalf("%v %v", out, err)
		}
	})
	t.Run("empty list", func(t *testing.T) {
		out, err := DecodeEndpoints([]byte(`{"apiVersion":"v1","kind":"List","items":[]}`))
		if err != nil || len(out) != 0 {
			t.Fatalf("%v %v", out, err)
		}
	})
}

// TestLiveEndpointsFollowTheLoader: the endpoints that live EndpointSlices
// give every backend are the ones the revision loader gives it when the
// same slices are in the revision.
func TestLiveEndpointsFollowTheLoader(t *testing.T) {
	services := []string{
		webSvc, // http:80→8080, admin:9000→9000
		service("default", "api", ":7000:7001"),
		service("default", "unnamed-target", "http:81:0"),
		service("other", "web", "http:80:8080"),
		service("default", "static", "http:80:80"),
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: ext\n  namespace: default\nspec:\n  type: ExternalName\n  externalName: example.com\n  ports:\n  - port: 443\n",
	}
	ingresses := ingress("default", "ing", "foo.com",
		"Prefix /web web 80", "Prefix /admin web admin", "Prefix /api api 7000", "Prefix /u unnamed-target 81",
		"Prefix /static static 80", "Prefix /ext ext 443")
	other := ingress("other", "ing", "bar.com", "Prefix / web 80")
	slices := []string{
		slice("default", "web-1", "web", "http", "8080", "127.0.0.1", "10.0.0.9!", "10.0.0.8?"),
		slice("default", "web-2", "web", "admin", "9000", "127.0.0.2", "127.0.0.1"),
		// No ports: the target port (or the port when it is unset).
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: api-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: api\naddressType: IPv4\nendpoints:\n- addresses: [\"127.0.0.5\"]\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: u-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: unnamed-target\naddressType: IPv4\nendpoints:\n- addresses: [\"127.0.0.6\"]\n",
		// No ready endpoint at all.
		slice("other", "web-1", "web", "http", "8080", "10.1.0.1!"),
		// An ExternalName Service keeps its name.
		slice("default", "ext-1", "ext", "", "443", "127.0.0.7"),
		// Unlabelled: belongs to no Service.
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: stray\n  namespace: default\naddressType: IPv4\nendpoints:\n- addresses: [\"127.0.0.8\"]\n",
	}
	withSlices := buildDocs(t, Options{}, append(append(append([]string{}, services...), ingresses, other), slices...)...)
	without := buildDocs(t, Options{}, append(append([]string{}, services...), ingresses, other)...)
	var live []discoveryv1.EndpointSlice
	for _, doc := range slices {
		var s discoveryv1.EndpointSlice
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		live = append(live, s)
	}
	got := LiveEndpoints(without.Backends, live)
	want := map[string][]string{}
	for key, b := range withSlices.Backends {
		if b.ExternalName || b.Service.Name == "static" {
			continue
		}
		want[key] = b.Endpoints
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("live endpoints\n %v\nwant (as loaded from a revision)\n %v", got, want)
	}
	// Spot checks, so that the comparison cannot pass on two empty maps.
	for key, eps := range map[string][]string{
		"default/web:80":            {"10.0.0.8:8080", "127.0.0.1:8080"},
		"default/web:9000":          {"127.0.0.1:9000", "127.0.0.2:9000"},
		"default/api:7000":          {"127.0.0.5:7001"},
		"default/unnamed-target:81": {"127.0.0.6:81"},
		"other/web:80":              {},
	} {
		if !reflect.DeepEqual(got[key], eps) {
			t.Errorf("%s: %v, want %v", key, got[key], eps)
		}
	}
	if _, ok := got["default/static:80"]; ok {
		t.Error("a Service without slices in the live set got live endpoints")
	}
	if without.Backends["default/static:80"] == nil || without.Backends["default/ext:443"] == nil {
		t.Fatalf("test configuration lacks backends: %v", without.Backends)
	}
}

func TestWriteEndpointsFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gw-live")
	path := filepath.Join(dir, revisions.EndpointsFileName)
	one := []discoveryv1.EndpointSlice{apiSlice("default", "web-1", "web", 8080, "127.0.0.1")}
	if err := WriteEndpointsFile(path, one); err != nil {
		t.Fatal(err)
	}
	got, err := ReadEndpointsFile(path)
	if err != nil || len(got) != 1 || got[0].Endpoints[0].Addresses[0] != "127.0.0.1" {
		t.Fatalf("read back %+v %v", got, err)
	}
	before, _ := os.Stat(path)
	// The same state writes nothing: the file keeps its inode.
	if err := WriteEndpointsFile(path, one); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("an unchanged state replaced the file")
	}
	// A new state replaces it by rename; no temp file is left.
	two := append(one, apiSlice("default", "web-2", "web", 8080, "127.0.0.2"))
	if err := WriteEndpointsFile(path, two); err != nil {
		t.Fatal(err)
	}
	after2, _ := os.Stat(path)
	if os.SameFile(after, after2) {
		t.Error("a changed state was written in place, not renamed over")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %v", entries)
	}
	// A write failing at any step leaves the previous file whole.
	prev, _ := os.ReadFile(path)
	three := append(two, apiSlice("default", "web-3", "web", 8080, "127.0.0.3"))
	data, _ := EncodeEndpoints(three)
	for at := 1; ; at++ {
		j := fsfault.New(at, fsfault.Crash)
		err := writeEndpointsFile(j.Wrap(revisions.OS()), path, data)
		if j.Hit() == "" {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if err == nil {
			t.Fatalf("fault at %s not reported", j.Hit())
		}
		if cur, _ := os.ReadFile(path); !bytes.Equal(cur, prev) && !bytes.Equal(cur, data) {
			t.Fatalf("fault at %s left a partial file", j.Hit())
		}
		_ = revisions.OS().RemoveStale(dir)
		if err := os.WriteFile(path, prev, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadEndpointsFile(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

// FuzzDecodeEndpoints: any bytes decode without a panic, failures are
// *EndpointsError, and what decodes encodes to a fixed point.
func FuzzDecodeEndpoints(f *testing.F) {
	seed, _ := EncodeEndpoints([]discoveryv1.EndpointSlice{
		apiSlice("default", "web-1", "web", 8080, "127.0.0.1", "10.0.0.1"),
		apiSlice("default", "web-2", "web", 8080),
	})
	f.Add(seed)
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a","namespace":"b"},"addressType":"FQDN","endpoints":[{"addresses":["x.example"]}]}]}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{}]}`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := DecodeEndpoints(data)
		if err != nil {
			var ee *EndpointsError
			if !errors.As(err, &ee) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		enc, err := EncodeEndpoints(out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeEndpoints(enc)
		if err != nil {
			t.Fatalf("own encoding does not decode: %v\n%s", err, enc)
		}
		again, err := EncodeEndpoints(back)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not a fixed point (%v):\n%s\n%s", err, enc, again)
		}
		_ = LiveEndpoints(nil, out)
	})
}
