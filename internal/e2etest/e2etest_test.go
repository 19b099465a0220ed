package e2etest

import (
	"reflect"
	"testing"

	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
)

// The configurations the suites install must be clean for the gateway: a
// typo here would turn every scenario into an object-level fallback.
func TestConfigIsValidForTheGateway(t *testing.T) {
	for _, c := range []Config{
		{Upstreams: []string{"127.0.0.1:9001", "127.0.0.1:9002"}},
		{Upstreams: []string{"127.0.0.1:9001"}, HealthCheck: true, Host: "gw.example"},
	} {
		snap, err := config.Build(config.Options{Dirs: []string{c.Write(t)}, IngressClass: "revgate", Namespace: "default", Fallback: model.FallbackExclude})
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Problems) != 0 || len(snap.Routes) != 1 {
			t.Fatalf("%+v: problems %v, routes %v", c, snap.Problems, snap.Routes)
		}
		b := snap.Routes[0].Cluster.Backends[0].Backend
		if len(b.Endpoints) != len(c.Upstreams) || (b.HealthCheck != nil) != c.HealthCheck {
			t.Fatalf("%+v: backend %+v", c, b)
		}
		// The same slices in a live endpoints file give the same endpoints.
		slices, err := c.Slices()
		if err != nil {
			t.Fatal(err)
		}
		if live := config.LiveEndpoints(snap.Backends, slices); !reflect.DeepEqual(live[b.Key], b.Endpoints) {
			t.Fatalf("%+v: live endpoints %v, revision endpoints %v", c, live, b.Endpoints)
		}
	}
	bad := Config{Upstreams: []string{"127.0.0.1:9001"}, Extra: []string{BrokenIngress}}
	snap, err := config.Build(config.Options{Dirs: []string{bad.Write(t)}, IngressClass: "revgate", Namespace: "default", Fallback: model.FallbackExclude})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Errors()) != 1 {
		t.Fatalf("BrokenIngress: errors %v, want exactly one", snap.Errors())
	}
	if _, err := (Config{Upstreams: []string{"no-port"}}).YAML(); err == nil {
		t.Fatal("an upstream without a port was accepted")
	}
}
