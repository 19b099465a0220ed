package controller

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// irDoc renders an IngressRoute: fqdn "" makes a vertex; routes are
// "match=service" or "match->delegate".
func irDoc(ns, name, fqdn string, routes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n", name, ns)
	if fqdn != "" {
		fmt.Fprintf(&b, "  virtualhost:\n    fqdn: %s\n", fqdn)
	}
	b.WriteString("  routes:\n")
	for _, r := range routes {
		if m, d, ok := strings.Cut(r, "->"); ok {
			fmt.Fprintf(&b, "  - match: %s\n    delegate:\n      name: %s\n", m, d)
			continue
		}
		m, svc, _ := strings.Cut(r, "=")
		fmt.Fprintf(&b, "  - match: %s\n    services:\n    - name: %s\n      port: 80\n", m, svc)
	}
	return b.String()
}

// The statuses follow Contour's delegation rules: a root and what it
// delegates to are valid, an object no root reaches is orphaned, and a
// cycle, a duplicate fqdn or a missing delegate makes an object invalid.
func TestIngressRouteStatuses(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	installCRD(t, c)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	e.startController(c, nil)
	ns := e.ns
	docs := []string{
		irDoc(ns, "root", "root.example", "/=web", "/blog->blog"),
		irDoc(ns, "blog", "", "/blog=web"),
		irDoc(ns, "lonely", "", "/=web"),
		irDoc(ns, "dup-a", "dup.example", "/=web"),
		irDoc(ns, "dup-b", "DUP.example", "/=web"),
		irDoc(ns, "dangling", "dangling.example", "/->nowhere"),
		irDoc(ns, "cycle-root", "cycle.example", "/->cycle-a"),
		irDoc(ns, "cycle-a", "", "/->cycle-b"),
		irDoc(ns, "cycle-b", "", "/->cycle-a"),
		irDoc(ns, "outside", "outside.example", "/api->outside-child"),
		irDoc(ns, "outside-child", "", "/other=web"),
		irDoc(ns, "no-service", "nosvc.example", "/=missing"),
	}
	apply(t, c, []byte(strings.Join(docs, "---\n")))
	tests := []struct {
		name, status, description string
	}{
		{"root", contourValid, "valid IngressRoute"},
		{"blog", contourValid, "delegated ingress route"},
		{"lonely", contourOrphaned, "not part of a delegation chain from a root"},
		{"dup-a", contourInvalid, `fqdn "dup.example" is also used by ` + ns + "/dup-b"},
		{"dup-b", contourInvalid, `fqdn "dup.example" is also used by ` + ns + "/dup-a"},
		{"dangling", contourInvalid, "nowhere"},
		{"cycle-root", contourValid, "valid IngressRoute"},
		{"cycle-a", contourValid, "delegated ingress route"},
		{"cycle-b", contourInvalid, "cycle"},
		{"outside", contourValid, "valid IngressRoute"},
		{"outside-child", contourInvalid, "/other"},
		{"no-service", contourInvalid, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u *unstructured.Unstructured
			waitFor(t, waitLong, "the status of "+tt.name, func() (bool, string) {
				var err error
				u, err = c.dyn.Resource(IngressRouteResource).Namespace(ns).Get(e.ctx(), tt.name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				st, _, _ := unstructured.NestedString(u.Object, "status", "currentStatus")
				desc, _, _ := unstructured.NestedString(u.Object, "status", "description")
				return st == tt.status && strings.Contains(desc, tt.description), st + ": " + desc
			})
		})
	}
	t.Run("written only on change", func(t *testing.T) {
		e := e.in(t)
		before, err := c.dyn.Resource(IngressRouteResource).Namespace(ns).List(e.ctx(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.settle()
		e.settle()
		after, err := c.dyn.Resource(IngressRouteResource).Namespace(ns).List(e.ctx(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range before.Items {
			if b, a := before.Items[i].GetResourceVersion(), after.Items[i].GetResourceVersion(); a != b {
				t.Errorf("%s written again: resourceVersion %s → %s", before.Items[i].GetName(), b, a)
			}
		}
	})
	t.Run("status writes cut no revision", func(t *testing.T) {
		e := e.in(t)
		revs := e.revisions()
		e.settle()
		e.settle()
		if after := e.revisions(); len(after) != len(revs) {
			t.Fatalf("revisions %v → %v", revs, after)
		}
	})
	t.Run("repairing the cycle makes its objects valid", func(t *testing.T) {
		e := e.in(t)
		apply(t, c, []byte(irDoc(ns, "cycle-b", "", "/=web")))
		waitFor(t, waitLong, "cycle-b valid", func() (bool, string) {
			u, err := c.dyn.Resource(IngressRouteResource).Namespace(ns).Get(e.ctx(), "cycle-b", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st, _, _ := unstructured.NestedString(u.Object, "status", "currentStatus")
			desc, _, _ := unstructured.NestedString(u.Object, "status", "description")
			return st == contourValid, st + ": " + desc
		})
	})
}

// The CRD of deploy/ is structural: the API server prunes unknown fields,
// refuses wrong types, and keeps the status apart from the spec.
func TestIngressRouteCRD(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	installCRD(t, c)
	e := newEnv(t, c)
	ri := c.dyn.Resource(IngressRouteResource).Namespace(e.ns)
	tests := []struct {
		name    string
		doc     string
		refused string
	}{
		{name: "unknown fields are pruned", doc: irDoc(e.ns, "pruned", "a.example", "/=web") + "  nonsense: true\n"},
		{name: "a port must be a number", doc: strings.Replace(irDoc(e.ns, "badport", "b.example", "/=web"), "port: 80", "port: eighty", 1), refused: "port"},
		{name: "routes are required", doc: "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: noroutes\n  namespace: " + e.ns + "\nspec:\n  virtualhost:\n    fqdn: c.example\n", refused: "routes"},
		{name: "a TLS version is 1.1, 1.2 or 1.3", doc: strings.Replace(irDoc(e.ns, "tls10", "d.example", "/=web"), "    fqdn: d.example\n", "    fqdn: d.example\n    tls:\n      secretName: s\n      minimumProtocolVersion: \"1.0\"\n", 1), refused: "minimumProtocolVersion"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tt.doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			got, err := ri.Create(e.ctx(), u, metav1.CreateOptions{})
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("want a refusal naming %q, got %v", tt.refused, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Object["spec"].(map[string]any)["nonsense"]; ok {
				t.Fatal("unknown field kept")
			}
		})
	}
	t.Run("status is a subresource", func(t *testing.T) {
		u, err := ri.Get(e.ctx(), "pruned", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = map[string]any{"currentStatus": "valid"}
		u, err = ri.Update(e.ctx(), u, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.Object["status"]; ok {
			t.Fatal("an update of the object wrote its status")
		}
		u.Object["status"] = map[string]any{"currentStatus": "orphaned", "description": "d"}
		u, err = ri.UpdateStatus(e.ctx(), u, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st, _, _ := unstructured.NestedString(u.Object, "status", "currentStatus"); st != "orphaned" {
			t.Fatalf("status %q", st)
		}
	})
}
