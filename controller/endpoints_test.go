package controller

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/revisions"
)

// last returns the last list of live endpoints written.
func (w *recordingWriter) last() []discoveryv1.EndpointSlice {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.writes) == 0 {
		return nil
	}
	return w.writes[len(w.writes)-1]
}

// liveOf sums up the live endpoints written last for Service service:
// "name=addr,addr" per slice, sorted.
func (e *env) liveOf(service string) []string {
	var out []string
	for _, sl := range e.eps.last() {
		if sl.Namespace != e.ns || sl.Labels[discoveryv1.LabelServiceName] != service {
			continue
		}
		var addrs []string
		for _, ep := range sl.Endpoints {
			addrs = append(addrs, ep.Addresses...)
		}
		out = append(out, sl.Name+"="+strings.Join(addrs, ","))
	}
	return out
}

// waitLive waits until the live endpoints of a Service are want.
func (e *env) waitLive(service string, want ...string) {
	e.t.Helper()
	waitFor(e.t, waitLong, fmt.Sprintf("live endpoints of %s: %v", service, want), func() (bool, string) {
		got := e.liveOf(service)
		return reflect.DeepEqual(got, want), fmt.Sprint(got)
	})
}

// Regression: a served Service whose last EndpointSlice was deleted kept
// no slice in the live endpoints file, so the gateway went back to the
// endpoints its revision was cut with. The controller writes an empty slice
// for it, named and labelled after it, and drops it once a slice is back;
// an ExternalName Service, which has no endpoints, gets none.
func TestEmptySliceForServiceWithoutEndpoints(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: e.ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "upstream.example"}}
	if _, err := c.client.CoreV1().Services(e.ns).Create(e.ctx(), ext, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(c, nil)
	e.createIngress("web", "web.example", "web")
	e.createIngress("ext", "ext.example", "ext")
	e.waitRevision(1)
	e.waitLive("web", "web-1=10.0.0.1")

	if err := c.client.DiscoveryV1().EndpointSlices(e.ns).Delete(e.ctx(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLive("web", "web"+EmptySliceSuffix+"=")
	for _, sl := range e.eps.last() {
		if sl.Name == "web"+EmptySliceSuffix && (sl.AddressType != discoveryv1.AddressTypeIPv4 || len(sl.Endpoints) != 0 || sl.Labels[labelManagedBy] != managedBy) {
			t.Fatalf("empty slice %+v", sl)
		}
	}
	if got := e.liveOf("ext"); len(got) != 0 {
		t.Fatalf("the ExternalName Service has live endpoints %v", got)
	}

	sl := sliceObj(e.ns, "web-2", "web", "10.0.0.2")
	sl.Endpoints[0].TargetRef = nil
	if _, err := c.client.DiscoveryV1().EndpointSlices(e.ns).Create(e.ctx(), sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLive("web", "web-2=10.0.0.2")
	if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1}) {
		t.Fatalf("revisions %v: endpoints cut a revision", revs)
	}
}

// Regression: the live endpoints covered only the Services of the newest
// snapshot, so a node serving an older revision (its snapshot held back by
// the rollout, or after a fallback) kept that revision's endpoints for the
// Services the newer snapshot no longer names. They follow the cluster
// too, down to an empty slice.
func TestLiveEndpointsOfTheServedRevision(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	g := &gate{open: true}
	e.rollout = g
	e.createService("web", "10.0.0.1")
	e.createService("web2", "10.0.0.2")
	e.startController(c, nil)
	e.createIngress("web", "web.example", "web")
	e.waitRevision(1)
	e.waitLive("web", "web-1=10.0.0.1")

	g.setOpen(false)
	e.editIngress("web", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "web2" })
	e.waitLive("web2", "web2-1=10.0.0.2")
	e.setEndpoints("web", "10.0.0.9")
	e.waitLive("web", "web-1=10.0.0.9")
	if err := c.client.DiscoveryV1().EndpointSlices(e.ns).Delete(e.ctx(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLive("web", "web"+EmptySliceSuffix+"=")
	if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1}) {
		t.Fatalf("revisions %v while the rollout holds the snapshot back", revs)
	}

	// Once the newer snapshot is installed and judged good, revision 1 is
	// no longer served and its Service leaves the file.
	g.setOpen(true)
	e.waitRevision(2)
	e.waitLive("web", "web"+EmptySliceSuffix+"=") // both revisions published
	l := e.layout.Defaulted()
	pub, err := l.PublishedSlots(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pub {
		if s.Revision == 1 { // as the monitor does once revision 2 is good
			if err := os.Remove(s.Path); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.waitLive("web")
}
