package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/controller"
	"github.com/revgate/revgate/controller/rollout"
	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

// rolloutRole names the Role of deploy/controller/rbac.yaml that grants
// node-by-node rollouts their rights, and its binding.
const rolloutRole = "revgate-controller-rollout"

// deployObjects decodes the documents of a deploy/controller file whose
// kind is kind into out's element type.
func deployObjects[T any](t *testing.T, name, kind string) []T {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(controller.ReadDeploy(t, name))))
	var out []T
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		if tm.Kind != kind {
			continue
		}
		var obj T
		if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
			t.Fatalf("%s: %s: %v", name, kind, err)
		}
		out = append(out, obj)
	}
}

// The Role that deploy/controller/rbac.yaml grants for node-by-node
// rollouts is the rollout package's PolicyRules, in the default Lease
// namespace, bound to the controller's ServiceAccount.
func TestDeployedRolloutRoleIsPolicyRules(t *testing.T) {
	var role *rbacv1.Role
	for _, r := range deployObjects[rbacv1.Role](t, "rbac.yaml", "Role") {
		if r.Name == rolloutRole {
			role = &r
		}
	}
	if role == nil {
		t.Fatalf("rbac.yaml has no Role %s", rolloutRole)
	}
	if role.Namespace != rollout.DefaultNamespace {
		t.Errorf("Role %s in namespace %q, want the Leases' default namespace %q", rolloutRole, role.Namespace, rollout.DefaultNamespace)
	}
	if !reflect.DeepEqual(role.Rules, rollout.PolicyRules()) {
		t.Errorf("Role %s grants\n%+v\nwant rollout.PolicyRules()\n%+v", rolloutRole, role.Rules, rollout.PolicyRules())
	}
	bound := false
	for _, b := range deployObjects[rbacv1.RoleBinding](t, "rbac.yaml", "RoleBinding") {
		if b.RoleRef.Kind != "Role" || b.RoleRef.Name != rolloutRole {
			continue
		}
		if b.Namespace != role.Namespace {
			t.Errorf("RoleBinding %s in namespace %q, the Role in %q", b.Name, b.Namespace, role.Namespace)
		}
		for _, s := range b.Subjects {
			bound = bound || s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "kube-system" && s.Name == "revgate-controller"
		}
	}
	if !bound {
		t.Errorf("no RoleBinding binds Role %s to the ServiceAccount kube-system/revgate-controller", rolloutRole)
	}
}

// The controller's ServiceAccount, with the rights of rbac.yaml alone,
// takes part in a rollout in the Leases' namespace (its status, the turn,
// a verdict and their Events) and may not touch Leases elsewhere.
func TestRolloutAsServiceAccount(t *testing.T) {
	t.Parallel()
	admin := kubetest.Config(t)
	controller.ApplyDeploy(t, admin, "rbac.yaml")
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:kube-system:revgate-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	target := fmt.Sprintf("rbac%04x", rand.IntN(1<<16))
	clk := clocktest.New(time.Now().Truncate(time.Second))
	r, err := rollout.New(rollout.Options{Client: sa, Target: target, Node: "node-a", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// The binding reaches the authorizer's cache within a moment.
	controller.WaitFor(t, 30*time.Second, "the rollout's rights", func() (bool, string) {
		_, err := r.Statuses(ctx)
		return err == nil, fmt.Sprint(err)
	})
	// The first call publishes the node's status; the join grace has passed
	// by the second.
	for i := 0; ; i++ {
		ok, after, err := r.MayInstall(ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if i == 3 {
			t.Fatalf("the only node may not install; ask again after %s", after)
		}
		clk.Step(after)
	}
	if err := r.Report(ctx, "h1", controller.Verdict{Revision: 1, Outcome: revisions.OutcomeGood, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := r.Statuses(ctx)
	if err != nil || len(st) != 1 || st[0].Verdict != rollout.VerdictGood {
		t.Fatalf("statuses %+v %v", st, err)
	}
	// Listing Events is not granted: read them as the admin.
	admins, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := admins.CoreV1().Events(rollout.DefaultNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + rollout.TurnLeaseName(target)})
	if err != nil || len(evs.Items) != 2 {
		t.Fatalf("the rollout's Events: %v %v", evs, err)
	}

	_, err = sa.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "revgate-rollout." + target}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("creating a Lease outside the rollout's namespace: want Forbidden, got %v", err)
	}
}
