package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

// kongObject and kongResponse spell Kong Ingress Controller's
// /debug/config/fallback response as its documentation and API types give
// it: the report must decode into them with no field left over.
type kongObject struct {
	Group          string   `json:"group"`
	Kind           string   `json:"kind"`
	Version        string   `json:"version,omitempty"`
	Namespace      string   `json:"namespace"`
	Name           string   `json:"name"`
	ID             string   `json:"id"`
	CausingObjects []string `json:"causingObjects,omitempty"`
}

type kongResponse struct {
	Status            string       `json:"status"`
	BrokenObjects     []kongObject `json:"brokenObjects,omitempty"`
	ExcludedObjects   []kongObject `json:"excludedObjects,omitempty"`
	BackfilledObjects []kongObject `json:"backfilledObjects,omitempty"`
}

func keysOf(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The fallback report is Kong's, field for field: group, kind, version (not
// on broken objects), namespace (also when empty), name, id and
// causingObjects written "group/Kind:namespace/name" with the core group as
// "core". Before, causingObjects had no group and id and version were
// missing.
func TestFallbackReportIsKongs(t *testing.T) {
	dir := filepath.Join("testdata", "golden", "broken-ingressclass", "revgate-pod-1")
	snap, err := Build(Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(snap.Fallback)
	if err != nil {
		t.Fatal(err)
	}
	var kong kongResponse
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kong); err != nil {
		t.Fatalf("not Kong's shape: %v\n%s", err, data)
	}
	if kong.Status != string(model.FallbackTriggered) || len(kong.BrokenObjects) == 0 || len(kong.ExcludedObjects) == 0 {
		t.Fatalf("report %s", data)
	}
	var raw struct {
		Broken   []json.RawMessage `json:"brokenObjects"`
		Excluded []json.RawMessage `json:"excludedObjects"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, raw.Broken[0]); !slices.Equal(got, []string{"group", "id", "kind", "name", "namespace"}) {
		t.Errorf("broken object keys %v", got)
	}
	for i, o := range kong.ExcludedObjects {
		got := keysOf(t, raw.Excluded[i])
		if !slices.Equal(got, []string{"causingObjects", "group", "id", "kind", "name", "namespace", "version"}) {
			t.Errorf("excluded object %d keys %v", i, got)
		}
		want := map[string]string{"IngressClass": "v1", "Ingress": "v1", "IngressRoute": "v1beta1", "Service": "v1"}[o.Kind]
		if o.Version != want {
			t.Errorf("%s/%s version %q, want %q", o.Kind, o.Name, o.Version, want)
		}
	}
	// The broken IngressClass is cluster-scoped: "group/Kind:name".
	if c := kong.ExcludedObjects[0].CausingObjects; !slices.Equal(c, []string{"networking.k8s.io/IngressClass:revgate"}) {
		t.Errorf("causingObjects %q", c)
	}
}

func TestCauseString(t *testing.T) {
	for _, tc := range []struct {
		ref  model.ObjectRef
		want string
	}{
		{model.ObjectRef{Kind: "Service", Namespace: "ns", Name: "web"}, "core/Service:ns/web"},
		{model.ObjectRef{Kind: "Secret", Namespace: "ns", Name: "tls"}, "core/Secret:ns/tls"},
		{model.ObjectRef{Group: "networking.k8s.io", Kind: "IngressClass", Name: "revgate"}, "networking.k8s.io/IngressClass:revgate"},
		{model.ObjectRef{Group: "contour.heptio.com", Kind: "IngressRoute", Namespace: "team", Name: "a"}, "contour.heptio.com/IngressRoute:team/a"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := causeString(tc.ref); got != tc.want {
				t.Fatalf("got %q", got)
			}
		})
	}
}
