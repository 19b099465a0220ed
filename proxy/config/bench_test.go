package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

// benchStore generates teams of 100 objects each: a Service, its
// EndpointSlice, a root IngressRoute delegating to a child, and 96 Ingresses.
// One object per team is broken, rotating over: an Ingress pointing at a
// missing Service, an EndpointSlice with a bad address (cutting off the
// Service and everything using it), and a child IngressRoute routing outside
// its delegated prefix.
func benchStore(tb testing.TB, teams int) *store {
	st := newStore()
	var probs []model.Problem
	for i := 0; i < teams; i++ {
		ns := fmt.Sprintf("team-%d", i)
		var docs []string
		docs = append(docs, service(ns, "app", "http:80:8080"))
		addr := "10.0.0.1"
		if i%4 == 1 {
			addr = "bad-address"
		}
		docs = append(docs, slice(ns, "app-1", "app", "http", "8080", addr, "10.0.0.2"))
		docs = append(docs, ir(ns, "root", ns+".example.com", "/ -> app:80", "/child => child"))
		child := "/child -> app:80"
		if i%4 == 2 {
			child = "/elsewhere -> app:80"
		}
		docs = append(docs, ir(ns, "child", "", child))
		for j := 0; j < 96; j++ {
			svc := "app"
			if j == 0 && i%4 == 0 || j == 0 && i%4 == 3 {
				svc = "missing"
			}
			docs = append(docs, ingress(ns, fmt.Sprintf("ing-%d", j), fmt.Sprintf("ing-%d.%s.example.com", j, ns), "Prefix /a app 80", "Exact /b "+svc+" 80"))
		}
		decodeFile(st, ns+".yaml", []byte(strings.Join(docs, "---\n")), "default", &probs)
	}
	if len(probs) != 0 {
		tb.Fatalf("generated configuration does not load: %+v", probs[0])
	}
	return st
}

func BenchmarkBuild10kObjects100Broken(b *testing.B) {
	st := benchStore(b, 100)
	if n := len(st.objects); n != 10000 {
		b.Fatalf("%d objects", n)
	}
	bld := &builder{opts: Options{Dirs: []string{"bench"}, IngressClass: "revgate", Namespace: "default", Fallback: model.FallbackExclude}}
	snap := bld.build(st, nil)
	if n := len(snap.Fallback.BrokenObjects); n != 100 {
		b.Fatalf("%d broken objects, want 100", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bld.build(st, nil)
	}
}

func TestBenchStoreShape(t *testing.T) {
	st := benchStore(t, 4)
	bld := &builder{opts: Options{Dirs: []string{"bench"}, IngressClass: "revgate", Namespace: "default", Fallback: model.FallbackExclude}}
	snap := bld.build(st, nil)
	if len(snap.Fallback.BrokenObjects) != 4 {
		t.Fatalf("broken %+v", snap.Fallback.BrokenObjects)
	}
	// team-1's EndpointSlice is broken: its Service and all 96 Ingresses and
	// the root go, the child is orphaned through delegation.
	excluded := 0
	for _, o := range snap.Fallback.ExcludedObjects {
		if o.Namespace == "team-1" {
			excluded++
		}
	}
	if excluded != 100 {
		t.Fatalf("team-1: %d excluded, want 100", excluded)
	}
}
