package controller

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/testcert"
)

// Creating an Ingress cuts a revision with it; editing it cuts exactly one
// more, however many edits a burst holds; endpoint churn, status writes and
// a restarted controller cut none.
func TestSnapshotsAndRevisions(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	e.startController(c, nil)
	e.createIngress("web", "web.example", "web")

	e.waitRevision(1)
	if f := e.ingressFile(1, "web"); !strings.Contains(f, "host: web.example") || strings.Contains(f, "resourceVersion") {
		t.Fatalf("rendered Ingress:\n%s", f)
	}
	if f := e.revisionFile(1, "configmaps/endpointslices/"+objectFile(e.ns, "web-1")); !strings.Contains(f, "10.0.0.1") {
		t.Fatalf("the revision does not carry the endpoints it was cut with:\n%s", f)
	}
	waitFor(t, waitLong, "the Ingress's status", func() (bool, string) {
		got := e.ingressAddresses("web")
		return reflect.DeepEqual(got, []string{publishAddr}), strings.Join(got, ",")
	})
	if got := e.eps.addresses(); !reflect.DeepEqual(got, []string{"10.0.0.1"}) {
		t.Fatalf("live endpoints %v", got)
	}

	t.Run("an edit cuts one revision", func(t *testing.T) {
		e := e.in(t)
		e.editIngress("web", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "www.example" })
		e.waitRevision(2)
		if !strings.Contains(e.ingressFile(2, "web"), "host: www.example") {
			t.Fatal("revision 2 does not hold the edit")
		}
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2}) {
			t.Fatalf("revisions %v after one edit", revs)
		}
	})

	t.Run("a burst of edits cuts one revision", func(t *testing.T) {
		e := e.in(t)
		for i := 0; i < 5; i++ {
			e.editIngress("web", func(ing *networkingv1.Ingress) {
				ing.Annotations = map[string]string{"example.com/edit": strings.Repeat("x", i+1)}
			})
		}
		e.waitRevision(3)
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
			t.Fatalf("revisions %v after a burst", revs)
		}
		if !strings.Contains(e.ingressFile(3, "web"), "xxxxx") {
			t.Fatal("revision 3 does not hold the last edit")
		}
	})

	t.Run("endpoint churn cuts no revision", func(t *testing.T) {
		e := e.in(t)
		for _, addrs := range [][]string{{"10.0.0.1", "10.0.0.2"}, {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, {"10.0.0.3"}} {
			e.setEndpoints("web", addrs...)
			waitFor(t, waitLong, "live endpoints "+strings.Join(addrs, ","), func() (bool, string) {
				got := e.eps.addresses()
				return reflect.DeepEqual(got, addrs), strings.Join(got, ",")
			})
		}
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
			t.Fatalf("revisions %v after endpoint churn", revs)
		}
	})

	t.Run("a status cleared by someone is written again", func(t *testing.T) {
		e := e.in(t)
		ing, err := c.client.NetworkingV1().Ingresses(e.ns).Get(e.ctx(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ing.Status.LoadBalancer.Ingress = nil
		if _, err := c.client.NetworkingV1().Ingresses(e.ns).UpdateStatus(e.ctx(), ing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, waitLong, "the status written again", func() (bool, string) {
			got := e.ingressAddresses("web")
			return reflect.DeepEqual(got, []string{publishAddr}), strings.Join(got, ",")
		})
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
			t.Fatalf("revisions %v after a status write", revs)
		}
	})

	t.Run("statuses are written only on change", func(t *testing.T) {
		e := e.in(t)
		ing, err := c.client.NetworkingV1().Ingresses(e.ns).Get(e.ctx(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.settle()
		again, err := c.client.NetworkingV1().Ingresses(e.ns).Get(e.ctx(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion != ing.ResourceVersion {
			t.Fatalf("the Ingress was written again: resourceVersion %s → %s", ing.ResourceVersion, again.ResourceVersion)
		}
	})

	t.Run("a restarted controller cuts no revision", func(t *testing.T) {
		e := e.in(t)
		e.stopController()
		e.startController(c, nil)
		e.settle()
		e.clock.Step(2 * testMax)
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
			t.Fatalf("revisions %v after a restart", revs)
		}
	})

	t.Run("secrets are written 0600", func(t *testing.T) {
		e := e.in(t)
		crt, key := testcert.MustPEM(t, "www.example")
		createTLSSecret(t, e, "web-tls", crt, key)
		e.editIngress("web", func(ing *networkingv1.Ingress) {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"www.example"}, SecretName: "web-tls"}}
		})
		e.waitRevision(4)
		p := filepath.Join(e.layout.RevisionDir(4), installer.SecretsDir, "_objects", objectFile(e.ns, "web-tls"))
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v", p, fi.Mode().Perm())
		}
	})
}
