package monitor

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/internal/kubetest"
)

// TestNodeMirrorPodsWithAPIServer: the mirror pod of a static pod is found
// by the static pod's name and the node's, Events land on it, and Recreate
// deletes it only while it is the pod that was looked at.
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
			ObjectMeta: metav1.ObjectMeta{Name: "revgate.b-" + node, Namespace: "kube-system"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "proxy", Image: "revgate:dev"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := create()
	got, err := mirrors.MirrorPodOf(ctx, "revgate.b")
	if err != nil || got.UID != first.UID {
		t.Fatalf("mirror pod of revgate.b: %v %v", got, err)
	}
	if err := mirrors.EmitFor(ctx, "revgate.b", corev1.EventTypeWarning, EventFallbackToLastKnownGood, "revision 2 failed"); err != nil {
		t.Fatal(err)
	}
	if ev, ok := events(t, cs, first.Name)[EventFallbackToLastKnownGood]; !ok || ev.InvolvedObject.UID != first.UID {
		t.Fatalf("event %+v (found %v)", ev, ok)
	}

	// Another uid (the kubelet already recreated it): left alone.
	if err := mirrors.Recreate(ctx, "revgate.b", types.UID("0b9f5c32-0000-4000-8000-000000000000")); err != nil {
		t.Fatal(err)
	}
	if _, err := mirrors.MirrorPodOf(ctx, "revgate.b"); err != nil {
		t.Fatalf("a mirror pod of another uid was deleted: %v", err)
	}
	if err := mirrors.Recreate(ctx, "revgate.b", first.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := mirrors.MirrorPodOf(ctx, "revgate.b"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("after Recreate the mirror pod is still there: %v", err)
	}
	// Gone already: no error.
	if err := mirrors.Recreate(ctx, "revgate.b", first.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Get(ctx, first.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
}
