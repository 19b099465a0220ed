package monitor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// MirrorPods reaches the mirror pods of this node's static pods by the
// static pod's name. In slots mode the operand's pod name depends on the
// slot it runs in, so the monitor names the pod at each use.
type MirrorPods interface {
	// MirrorPodOf returns the mirror pod of the static pod staticPod.
	MirrorPodOf(ctx context.Context, staticPod string) (*corev1.Pod, error)
	// EmitFor records an Event on the mirror pod of staticPod.
	EmitFor(ctx context.Context, staticPod, eventType, reason, message string) error
	// Recreate deletes the mirror pod of staticPod when its uid is uid, for
	// the kubelet to create it again from the manifest: the kubelet never
	// updates a mirror pod's annotations by itself.
	Recreate(ctx context.Context, staticPod string, uid types.UID) error
}

// NodeMirrorPods is MirrorPods through client-go for the mirror pods of
// node Node, named <static pod>-<node>.
type NodeMirrorPods struct {
	Client kubernetes.Interface
	// Namespace of the mirror pods.
	Namespace string
	// Node is the node's name.
	Node string
	// Clock stamps Events; default RealClock.
	Clock Clock
}

var _ MirrorPods = (*NodeMirrorPods)(nil)

// Pod is the mirror pod of staticPod on the node.
func (n *NodeMirrorPods) Pod(staticPod string) *MirrorPod {
	return &MirrorPod{Client: n.Client, Namespace: n.Namespace, Name: staticPod + "-" + n.Node, Node: n.Node, Clock: n.Clock}
}

// MirrorPodOf gets the mirror pod of staticPod.
func (n *NodeMirrorPods) MirrorPodOf(ctx context.Context, staticPod string) (*corev1.Pod, error) {
	return n.Pod(staticPod).MirrorPod(ctx)
}

// EmitFor records an Event on the mirror pod of staticPod.
func (n *NodeMirrorPods) EmitFor(ctx context.Context, staticPod, eventType, reason, message string) error {
	return n.Pod(staticPod).Emit(ctx, eventType, reason, message)
}

// Recreate deletes the mirror pod of staticPod at once (grace period 0) if
// it still has uid; a pod already gone or replaced is no error.
func (n *NodeMirrorPods) Recreate(ctx context.Context, staticPod string, uid types.UID) error {
	p := n.Pod(staticPod)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := n.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s/%s for the kubelet to recreate it: %w", p.Namespace, p.Name, err)
	}
	return nil
}
