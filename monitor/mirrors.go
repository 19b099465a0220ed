package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/fallbackstatus"
)

// MirrorPods reaches the mirror pods of this node's static pods by the
// static pod's name. In slots mode the operand's pod name depends on the
// slot it runs in, so the monitor names the pod at each use.
type MirrorPods interface {
	// MirrorPodOf returns the mirror pod of the static pod staticPod.
	MirrorPodOf(ctx context.Context, staticPod string) (*corev1.Pod, error)
	// EmitFor records an Event on the mirror pod of staticPod.
	EmitFor(ctx context.Context, staticPod, eventType, reason, message string) error
	// Annotate makes the mirror pod of staticPod, when its uid is uid,
	// carry the fallback annotations want (fallbackstatus.Keys absent from
	// want are removed): the kubelet never updates a mirror pod's metadata
	// by itself after a manifest changed in place.
	Annotate(ctx context.Context, staticPod string, uid types.UID, want map[string]string) error
}

// NodeMirrorPods is MirrorPods through client-go for the mirror pods of
// node Node, named <static pod>-<node>.
type NodeMirrorPods struct {
	Client kubernetes.Interface
	// Namespace of the mirror pods.
	Namespace string
	// Node is the node's name.
	Node string
	// Clock stamps Events; default clock.RealClock{}.
	Clock clock.PassiveClock
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

// Annotate patches the fallback annotations onto the mirror pod of
// staticPod when it is still the pod of uid (the patch carries the pod's
// resourceVersion, so a pod changed meanwhile is left for the next try).
// Where the credentials may not change a pod's metadata (a node's, under the
// NodeRestriction admission plugin, may only delete its mirror pods), it
// deletes the mirror pod instead, at once, for the kubelet to create it
// again from the manifest; that leaves the node without the mirror pod for
// a few seconds. A pod already gone or replaced is no error.
func (n *NodeMirrorPods) Annotate(ctx context.Context, staticPod string, uid types.UID, want map[string]string) error {
	p := n.Pod(staticPod)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods := n.Client.CoreV1().Pods(p.Namespace)
	cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != uid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get mirror pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	ann := map[string]any{}
	for _, k := range fallbackstatus.Keys {
		ann[k] = nil
	}
	for k, v := range want {
		ann[k] = v
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": cur.ResourceVersion, "annotations": ann}})
	if err != nil {
		return err
	}
	_, err = pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "revgate-startup-monitor"})
	if apierrors.IsForbidden(err) {
		err = pods.Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("bring the fallback annotations onto mirror pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
