package monitor

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

// TestNodeMirrorPodsWithAPIServer: the mirror pod of a static pod is found
// by the static pod's name and the node's, Events land on it, and Annotate
// changes it only while it is the pod that was looked at: patched where the
// credentials allow, deleted for the kubelet to recreate where they only
// allow that.
func TestNodeMirrorPodsWithAPIServer(t *testing.T) {
	cs, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const node = "node-slots"
	mirrors := &NodeMirrorPods{Client: cs, Namespace: "kube-system", Node: node}
	create := func() *corev1.Pod {
		t.Helper()
		p, err := cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "revgate-b-" + node, Namespace: "kube-system"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "proxy", Image: "revgate:dev"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := create()
	got, err := mirrors.MirrorPodOf(ctx, "revgate-b")
	if err != nil || got.UID != first.UID {
		t.Fatalf("mirror pod of revgate-b: %v %v", got, err)
	}
	if err := mirrors.EmitFor(ctx, "revgate-b", corev1.EventTypeWarning, EventFallbackToLastKnownGood, "revision 2 failed"); err != nil {
		t.Fatal(err)
	}
	if ev, ok := events(t, cs, first.Name)[EventFallbackToLastKnownGood]; !ok || ev.InvolvedObject.UID != first.UID {
		t.Fatalf("event %+v (found %v)", ev, ok)
	}

	// Another uid (the kubelet already recreated it): left alone.
	want := map[string]string{revisions.AnnotationFallbackForRevision: "2", revisions.AnnotationFallbackReason: revisions.ReasonCrashLooping}
	if err := mirrors.Annotate(ctx, "revgate-b", types.UID("0b9f5c32-0000-4000-8000-000000000000"), want); err != nil {
		t.Fatal(err)
	}
	if got, err := mirrors.MirrorPodOf(ctx, "revgate-b"); err != nil || len(got.Annotations) != 0 {
		t.Fatalf("a mirror pod of another uid was changed: %v %v", got.Annotations, err)
	}
	// The pod itself: annotated in place, stale fallback keys removed.
	first.Annotations = map[string]string{revisions.AnnotationNextRetry: "2026-11-22T01:00:00Z", "other": "kept"}
	if _, err := cs.CoreV1().Pods("kube-system").Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mirrors.Annotate(ctx, "revgate-b", first.UID, want); err != nil {
		t.Fatal(err)
	}
	got, err = mirrors.MirrorPodOf(ctx, "revgate-b")
	if err != nil || got.UID != first.UID || !sameFallback(got.Annotations, want) || got.Annotations["other"] != "kept" {
		t.Fatalf("after Annotate: %v %v", got.Annotations, err)
	}

	// Credentials that may delete the node's pods but not change them (a
	// node's, under NodeRestriction): the mirror pod is deleted for the
	// kubelet to create it again.
	admin := kubetest.Config(t)
	for _, obj := range []any{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "mirror-deleter", Namespace: "kube-system"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "delete"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mirror-deleter", Namespace: "kube-system"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "mirror-deleter"},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "node-like"}}},
	} {
		var err error
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles("kube-system").Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings("kube-system").Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	limited := *admin
	limited.Impersonate = rest.ImpersonationConfig{UserName: "node-like"}
	lcs, err := kubernetes.NewForConfig(&limited)
	if err != nil {
		t.Fatal(err)
	}
	nodeMirrors := &NodeMirrorPods{Client: lcs, Namespace: "kube-system", Node: node}
	want[revisions.AnnotationFallbackAttempt] = "2"
	waitRBAC := time.Now().Add(10 * time.Second)
	for {
		err = nodeMirrors.Annotate(ctx, "revgate-b", first.UID, want)
		if err == nil || time.Now().After(waitRBAC) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the authorizer's cache picks up the binding
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Get(ctx, first.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("mirror pod not deleted for credentials that may not patch it: %v", err)
	}
	// Gone already: no error.
	if err := nodeMirrors.Annotate(ctx, "revgate-b", first.UID, want); err != nil {
		t.Fatal(err)
	}
}
