package monitor

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// MirrorPod is the operand's mirror pod seen through client-go: the
// mirror-pod check reads it and Events are recorded on it.
type MirrorPod struct {
	Client kubernetes.Interface
	// Namespace and Name of the mirror pod (<pod name>-<node name>).
	Namespace, Name string
	// Node is reported as the Event's source host.
	Node string
	// Clock stamps Events; default clock.RealClock{}.
	Clock clock.PassiveClock
}

var (
	_ PodSource = (*MirrorPod)(nil)
	_ EventSink = (*MirrorPod)(nil)
)

// MirrorPod gets the pod.
func (p *MirrorPod) MirrorPod(ctx context.Context) (*corev1.Pod, error) {
	pod, err := p.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get mirror pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return pod, nil
}

// Emit creates an Event on the mirror pod. The Event is written
// synchronously: the monitor often exits right after.
func (p *MirrorPod) Emit(ctx context.Context, eventType, reason, message string) error {
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name}
	if pod, err := p.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
		ref.UID, ref.ResourceVersion = pod.UID, pod.ResourceVersion
	}
	now := metav1.NewTime(clk.Now())
	host := p.Node
	if host == "" {
		host, _ = os.Hostname()
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: p.Name + ".",
			Namespace:    p.Namespace,
		},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: "revgate-startup-monitor", Host: host},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "revgate.io/startup-monitor",
		ReportingInstance:   "revgate-startup-monitor-" + host,
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := p.Client.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create event %s on %s/%s: %w", reason, p.Namespace, p.Name, err)
	}
	return nil
}
