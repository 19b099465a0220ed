package rollout

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// event records a Kubernetes Event on the target's turn Lease, where every
// node's Events about one rollout are found together. A failure to record
// it is logged: the Leases carry the state, the Events only tell it.
func (r *Rollout) event(ctx context.Context, eventType, reason, message string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := TurnLeaseName(r.opts.Target)
	ref := corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: r.opts.Namespace, Name: name}
	if l, err := r.leases().Get(ctx, name, metav1.GetOptions{}); err == nil {
		ref.UID, ref.ResourceVersion = l.UID, l.ResourceVersion
	}
	now := metav1.NewTime(r.opts.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: name + ".", Namespace: r.opts.Namespace},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: "revgate-controller", Host: r.opts.Node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "revgate.io/rollout",
		ReportingInstance:   "revgate-controller-" + r.opts.Node,
	}
	if _, err := r.opts.Client.CoreV1().Events(r.opts.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log.Warn("recording the rollout event failed", "event_reason", reason, "err", err)
	}
}
