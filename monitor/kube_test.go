package monitor

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// createMirrorPod stands in for the kubelet, which mirrors the static pod
// into the API server; node names keep the tests apart.
func createMirrorPod(t *testing.T, cs kubernetes.Interface, e *env, rev int, node string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	name, err := MirrorPodName(e.fs, e.l, rev, node)
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system",
			Labels: map[string]string{"app": "revgate", revisions.RevisionLabel: itoa(rev)}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "proxy", Image: "revgate:dev"}}},
	}
	if p, err = cs.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setReady(t, cs, p, ready)
	return p
}

func setReady(t *testing.T, cs kubernetes.Interface, p *corev1.Pod, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, Reason: "KubeletSaysSo", LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func events(t *testing.T, cs kubernetes.Interface, pod string) map[string]corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Event{}
	for _, ev := range list.Items {
		out[ev.Reason] = ev
	}
	return out
}

func TestMirrorPodReadyAndEventsWithAPIServer(t *testing.T) {
	cs, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	const node = "node-good"
	pod := createMirrorPod(t, cs, e, 2, node, false)
	mp := &MirrorPod{Client: cs, Namespace: "kube-system", Name: pod.Name, Node: node, Clock: e.clock}
	m := e.monitor(2, func(o *Options) { o.Pods, o.Events = mp, mp })

	// Healthy and ready, but the mirror pod is not Ready: not good.
	if e.stepFor(m, 10*time.Second) {
		t.Fatal("good while the mirror pod is not Ready")
	}
	ok, reason, msg, _ := m.mirrorPodCheck()(context.Background())
	if ok || reason != revisions.ReasonNotReady || !strings.Contains(msg, "is not Ready: KubeletSaysSo") {
		t.Fatalf("mirror pod check = %v %s %q", ok, reason, msg)
	}
	setReady(t, cs, pod, true)
	if !e.stepFor(m, 10*time.Second) {
		t.Fatal("not good once the mirror pod is Ready")
	}
	ev, ok := events(t, cs, pod.Name)[EventRevisionGood]
	if !ok || ev.Type != corev1.EventTypeNormal || ev.InvolvedObject.UID != pod.UID || !strings.Contains(ev.Message, "revision 2") {
		t.Fatalf("RevisionGood event = %+v (found %v)", ev, ok)
	}
}

func TestFallbackEventsWithAPIServer(t *testing.T) {
	cs, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.op.set(func(o *operand) { o.ready = 503; o.body = "[-]dependency/upstream-web failed: connection refused\n" })
	const node = "node-fallback"
	pod := createMirrorPod(t, cs, e, 2, node, true)
	mp := &MirrorPod{Client: cs, Namespace: "kube-system", Name: pod.Name, Node: node, Clock: e.clock}
	m := e.monitor(2, func(o *Options) { o.Pods, o.Events = mp, mp })
	if e.stepFor(m, DefaultFallbackTimeout+2*time.Second) {
		t.Fatal("finished with a retry pending")
	}
	// The kubelet would now mirror revision 1 with the fallback annotations.
	_, fb, _ := e.published()
	got := events(t, cs, pod.Name)
	fev, ok := got[EventFallbackToLastKnownGood]
	if !ok || fev.Type != corev1.EventTypeWarning || !strings.Contains(fev.Message, "revision 2 failed with DependencyUnhealthy, serving revision 1") {
		t.Fatalf("fallback event = %+v (found %v)", fev, ok)
	}
	if _, ok := got[EventRetryScheduled]; !ok {
		t.Fatalf("no RetryScheduled event: %v", got)
	}
	if c := fallbackstatus.DegradedCondition(fb); c.Status != metav1.ConditionTrue || c.Reason != revisions.ReasonDependencyUnhealthy {
		t.Fatalf("condition from the published annotations = %+v", c)
	}
	e.clock.Step(10 * time.Minute)
	e.step(m)
	if _, ok := events(t, cs, pod.Name)[EventRetryStarted]; !ok {
		t.Fatal("no RetryStarted event")
	}
}
