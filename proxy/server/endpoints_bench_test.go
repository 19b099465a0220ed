package server

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
)

// BenchmarkLiveEndpointsUpdate is the cost of one live endpoints update with
// 1,000 Services of 3 endpoints each: read the file, decode it, resolve every
// backend and swap the sets of the pools that changed. "one" changes one
// Service's endpoints per update (pod churn), "all" every Service's.
func BenchmarkLiveEndpointsUpdate(b *testing.B) {
	const services = 1000
	sb := newSnapshot()
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("svc%04d", i)
		be := &model.Backend{Key: "ns/" + name + ":80", Service: model.ObjectRef{Kind: "Service", Namespace: "ns", Name: name},
			Port: model.ServicePort{Name: "http", Number: 80}, Endpoints: []string{}}
		sb.s.Backends[be.Key] = be
		sb.route("bench.local", "/"+name, model.PathPrefix, single(name, be))
	}
	// state returns every Service's slice; gen shifts the endpoints of the
	// first n Services.
	state := func(n, gen int) []discoveryv1.EndpointSlice {
		out := make([]discoveryv1.EndpointSlice, 0, services)
		for i := 0; i < services; i++ {
			name, port := fmt.Sprintf("svc%04d", i), int32(8080)
			g := 0
			if i < n {
				g = gen
			}
			s := discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: name + "-abcde", Namespace: "ns", Labels: map[string]string{"kubernetes.io/service-name": name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port}},
			}
			for j := 0; j < 3; j++ {
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", g%200, i/250, (i%250)*1+j)}})
			}
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		changed int
	}{{"services=1000/changed=one", 1}, {"services=1000/changed=all", services}} {
		b.Run(tc.name, func(b *testing.B) {
			file := filepath.Join(b.TempDir(), "endpoints.json")
			if err := config.WriteEndpointsFile(file, state(tc.changed, 0)); err != nil {
				b.Fatal(err)
			}
			g := New(sb.s, Options{Endpoints: EndpointsOptions{File: file}, Logger: slog.New(slog.DiscardHandler)})
			// Two contents served alternately from memory, so that every
			// update changes the endpoints.
			var contents [2][]byte
			for i := range contents {
				data, err := config.EncodeEndpoints(state(tc.changed, i+1))
				if err != nil {
					b.Fatal(err)
				}
				contents[i] = data
			}
			n := 0
			g.live.readFile = func(string) ([]byte, error) { return contents[n%2], nil }
			b.SetBytes(int64(len(contents[0])))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				n = i
				g.live.sync("bench")
			}
			b.StopTimer()
			if got := g.debugEndpoints().(endpointsDoc); got.State != liveApplied || got.LiveBackends != services {
				b.Fatalf("endpoints state %+v", got)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
