package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/revgate/revgate/installer"
)

// The controller runs as the ServiceAccount of deploy/controller/rbac.yaml:
// it serves, writes statuses and records Events with those rights alone,
// and is denied what it does not need.
func TestRBAC(t *testing.T) {
	t.Parallel()
	admin := adminClients(t)
	installCRD(t, admin)
	apply(t, admin, readDeploy(t, "rbac.yaml"))
	cfg := rest.CopyConfig(admin.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:kube-system:revgate-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
	}
	sa := clientsFor(t, cfg)

	e := newEnv(t, admin)
	e.createService("web", "10.0.0.1")
	e.startController(sa, func(o *Options) { o.PublishAddress = "" })
	if _, err := admin.client.CoreV1().Nodes().Create(e.ctx(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: e.opts.NodeName},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node.example"}, {Type: corev1.NodeInternalIP, Address: "192.0.2.77"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.client.CoreV1().Nodes().Delete(e.ctx(), e.opts.NodeName, metav1.DeleteOptions{}) })
	e.createIngress("web", "web.example", "web")
	e.createIngress("broken", "broken.example", "missing")
	apply(t, admin, []byte(irDoc(e.ns, "root", "root.example", "/=web")))

	t.Run("serves and reports", func(t *testing.T) {
		e := e.in(t)
		e.waitRevision(1)
		waitFor(t, waitLong, "the node's address in the Ingress's status", func() (bool, string) {
			got := e.ingressAddresses("web")
			return reflect.DeepEqual(got, []string{"192.0.2.77"}), strings.Join(got, ",")
		})
		e.waitEvent(e.ns, "broken", EventTranslationFailed)
		e.waitEvent(installer.PodNamespace, e.opts.Layout.Target+"-"+e.opts.NodeName, installer.EventRevisionInstalled)
		waitFor(t, waitLong, "the IngressRoute's status", func() (bool, string) {
			u, err := admin.dyn.Resource(IngressRouteResource).Namespace(e.ns).Get(e.ctx(), "root", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st, _ := u.Object["status"].(map[string]any)
			return st["currentStatus"] == contourValid, fmt.Sprint("status ", st)
		})
	})

	denied := []struct {
		name string
		do   func() error
	}{
		{"create an Ingress", func() error {
			_, err := sa.client.NetworkingV1().Ingresses(e.ns).Create(e.ctx(), ingressObj(e.ns, "x", e.class, "x.example", "web", ""), metav1.CreateOptions{})
			return err
		}},
		{"update an Ingress's spec", func() error {
			ing, err := admin.client.NetworkingV1().Ingresses(e.ns).Get(e.ctx(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ing.Spec.Rules[0].Host = "evil.example"
			_, err = sa.client.NetworkingV1().Ingresses(e.ns).Update(e.ctx(), ing, metav1.UpdateOptions{})
			return err
		}},
		{"delete a Service", func() error {
			return sa.client.CoreV1().Services(e.ns).Delete(e.ctx(), "web", metav1.DeleteOptions{})
		}},
		{"get a Secret by name", func() error {
			_, err := sa.client.CoreV1().Secrets("kube-system").Get(e.ctx(), "revgate-controller-token", metav1.GetOptions{})
			return err
		}},
		{"list ConfigMaps", func() error {
			_, err := sa.client.CoreV1().ConfigMaps(e.ns).List(e.ctx(), metav1.ListOptions{})
			return err
		}},
		{"list Pods", func() error {
			_, err := sa.client.CoreV1().Pods("kube-system").List(e.ctx(), metav1.ListOptions{})
			return err
		}},
		{"update a Node", func() error {
			n, err := admin.client.CoreV1().Nodes().Get(e.ctx(), e.opts.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Labels = map[string]string{"evil": "true"}
			_, err = sa.client.CoreV1().Nodes().Update(e.ctx(), n, metav1.UpdateOptions{})
			return err
		}},
		{"delete an IngressRoute", func() error {
			return sa.dyn.Resource(IngressRouteResource).Namespace(e.ns).Delete(e.ctx(), "root", metav1.DeleteOptions{})
		}},
		{"delete an IngressClass", func() error {
			return sa.client.NetworkingV1().IngressClasses().Delete(e.ctx(), "revgate", metav1.DeleteOptions{})
		}},
	}
	for _, tt := range denied {
		t.Run("denied: "+tt.name, func(t *testing.T) {
			if err := tt.do(); !apierrors.IsForbidden(err) {
				t.Fatalf("want Forbidden, got %v", err)
			}
		})
	}
}
