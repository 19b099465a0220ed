package status

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func manifest(t *testing.T, rev int, annotations map[string]string) []byte {
	t.Helper()
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "revgate", Namespace: "kube-system", Labels: map[string]string{"app": "revgate", "revision": itoa(rev)}, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Image: "revgate:dev"}}},
	}
	data, err := yaml.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// layoutWithFallback is a node where revision 3 failed twice (retry pending)
// and revision 2 is served as the fallback.
func layoutWithFallback(t *testing.T) revisions.Layout {
	t.Helper()
	root := t.TempDir()
	l := revisions.Layout{ResourceDir: filepath.Join(root, "res"), ManifestsDir: filepath.Join(root, "man"), LockFile: filepath.Join(root, "lock")}.Defaulted()
	fs := revisions.OS()
	for _, d := range []string{l.ResourceDir, l.ManifestsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= 3; n++ {
		if err := os.MkdirAll(l.RevisionDir(n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.RevisionPodManifest(n), manifest(t, n, nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetLastKnownGood(fs, 2); err != nil {
		t.Fatal(err)
	}
	next := t0.Add(time.Hour)
	fb := &fallbackstatus.Fallback{ForRevision: 3, Reason: revisions.ReasonNotReady, Message: "readyz checks failing: [-]config failed: x",
		Time: t0.Add(20 * time.Minute), Attempt: 2, ToRevision: 2, NextRetry: &next}
	if err := fs.Publish(l.PublishedPodManifest(), manifest(t, 2, fb.Annotations())); err != nil {
		t.Fatal(err)
	}
	st := &revisions.State{LastKnownGood: 2, Revisions: map[int]*revisions.RevisionState{
		2: {Revision: 2, Outcome: revisions.OutcomeGood, Attempts: 1, DecidedAt: t0.Add(-time.Hour)},
		3: {Revision: 3, Outcome: revisions.OutcomeFailed, Reason: revisions.ReasonNotReady, Message: fb.Message, Attempts: 2, NextRetry: &next, DecidedAt: fb.Time,
			Fallbacks: []revisions.Fallback{
				{Time: t0, Reason: revisions.ReasonNotReady, Message: "first", To: 2, Attempt: 1},
				{Time: fb.Time, Reason: revisions.ReasonNotReady, Message: fb.Message, To: 2, Attempt: 2},
			}},
	}}
	if err := revisions.SaveState(fs, l.StateFile(), st); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCollect(t *testing.T) {
	l := layoutWithFallback(t)
	r, err := Collect(l, revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	if got := ints(r.Revisions); got != "1 2 3" {
		t.Errorf("revisions = %s", got)
	}
	if r.LastKnownGood != 2 {
		t.Errorf("last-known-good = %d", r.LastKnownGood)
	}
	if r.Published == nil || r.Published.Revision != 2 || r.Published.Fallback == nil || r.Published.Fallback.ForRevision != 3 {
		t.Fatalf("published = %+v", r.Published)
	}
	if len(r.Fallbacks) != 2 || r.Fallbacks[0].Message != "first" || r.Fallbacks[1].Attempt != 2 {
		t.Errorf("fallbacks = %+v", r.Fallbacks)
	}
	if len(r.PendingRetries) != 1 || r.PendingRetries[0].Revision != 3 || r.PendingRetries[0].Attempt != 3 || !r.PendingRetries[0].At.Equal(t0.Add(time.Hour)) {
		t.Errorf("retries = %+v", r.PendingRetries)
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems = %v", r.Problems)
	}

	var text bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"published:        2 (fallback: revision 3 failed with NotReady (attempt 2), serving revision 2; retry at 2026-11-22T01:00:00Z)",
		"last-known-good:  2", "retry:            revision 3 at 2026-11-22T01:00:00Z (attempt 3)", "[-]config failed: x"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	// The JSON shape is a contract: check the keys.
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"target", "revisions", "published", "lastKnownGood", "outcomes", "fallbacks", "pendingRetries"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, data)
		}
	}
	pub := generic["published"].(map[string]any)["fallback"].(map[string]any)
	for _, k := range []string{"forRevision", "reason", "message", "time", "attempt", "nextRetry", "toRevision"} {
		if _, ok := pub[k]; !ok {
			t.Errorf("published fallback JSON lacks %q: %v", k, pub)
		}
	}
}

func TestCollectEmpty(t *testing.T) {
	root := t.TempDir()
	r, err := Collect(revisions.Layout{ResourceDir: root, ManifestsDir: root}, revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	if r.Published != nil || r.LastKnownGood != 0 || len(r.Revisions) != 0 || len(r.Problems) != 0 {
		t.Fatalf("empty node = %+v", r)
	}
	data, _ := json.Marshal(r)
	if !strings.Contains(string(data), `"revisions":[]`) || !strings.Contains(string(data), `"published":null`) {
		t.Errorf("empty JSON = %s", data)
	}
}

func TestCollectReportsMalformedAnnotations(t *testing.T) {
	l := layoutWithFallback(t)
	bad := manifest(t, 2, map[string]string{revisions.AnnotationFallbackForRevision: "three", revisions.AnnotationFallbackReason: "NotReady"})
	if err := os.WriteFile(l.PublishedPodManifest(), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Collect(l, revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "fallback-for-revision") || r.Published.Revision != 2 {
		t.Fatalf("report = %+v", r)
	}
}

// A manifest put back by OpenShift's startup monitor carries only the three
// OpenShift annotations, maybe without a reason. Status reads it, the reason
// as Unknown, and does not claim the revision is not retried: before, it
// reported such a manifest as malformed.
func TestCollectFallbackWrittenByOpenShift(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"with reason", map[string]string{revisions.AnnotationFallbackForRevision: "3", revisions.AnnotationFallbackReason: "NotReady",
			revisions.AnnotationFallbackMessage: "etcd post-start hook not finished"}, "published:        2 (fallback: revision 3 failed with NotReady, serving the previous revision)\n"},
		{"without reason", map[string]string{revisions.AnnotationFallbackForRevision: "3"},
			"published:        2 (fallback: revision 3 failed with Unknown, serving the previous revision)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := layoutWithFallback(t)
			if err := os.WriteFile(l.PublishedPodManifest(), manifest(t, 2, tc.annotations), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Collect(l, revisions.OS())
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) != 0 || r.Published == nil || r.Published.Fallback == nil || r.Published.Fallback.ForRevision != 3 {
				t.Fatalf("report = %+v", r)
			}
			var text bytes.Buffer
			if err := WriteText(&text, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), tc.want) || strings.Contains(text.String(), "not retried") {
				t.Errorf("text lacks %q or says not retried:\n%s", tc.want, text.String())
			}
		})
	}
}

// MirrorPod creates a pod the way the kubelet mirrors a static pod (there
// is no kubelet here) with the given annotations and Ready state.
func MirrorPod(t *testing.T, cs kubernetes.Interface, node string, rev int, annotations map[string]string, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "revgate-" + node, Namespace: "kube-system",
			Labels:      map[string]string{"app": "revgate", "revision": itoa(rev)},
			Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "proxy", Image: "revgate:dev"}}},
	}
	p, err := cs.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.Now()}}
	p.Status.Phase = corev1.PodRunning
	p, err = cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCollectNodesFromAPIServer(t *testing.T) {
	cs, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	next := t0.Add(time.Hour)
	fb := &fallbackstatus.Fallback{ForRevision: 5, Reason: revisions.ReasonDependencyUnhealthy, Message: "[-]dependency/etcd failed: timeout",
		Time: t0, Attempt: 1, ToRevision: 4, NextRetry: &next}
	MirrorPod(t, cs, "node-a", 4, fb.Annotations(), true)
	MirrorPod(t, cs, "node-b", 5, nil, false)
	// As OpenShift's startup monitor may leave it: no reason.
	MirrorPod(t, cs, "node-c", 4, map[string]string{revisions.AnnotationFallbackForRevision: "5"}, true)

	nodes, err := CollectNodes(context.Background(), cs, "kube-system", "app=revgate")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("nodes = %+v", nodes)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	if a.Node != "node-a" || !a.Ready || a.Revision != 4 || a.Fallback == nil || a.Fallback.ToRevision != 4 || a.Degraded.Status != metav1.ConditionTrue || a.Degraded.Reason != revisions.ReasonDependencyUnhealthy {
		t.Errorf("node-a = %+v", a)
	}
	if b.Ready || b.Fallback != nil || b.Degraded.Status != metav1.ConditionFalse {
		t.Errorf("node-b = %+v", b)
	}
	if c.Error != "" || c.Fallback == nil || c.Fallback.Reason != fallbackstatus.ReasonUnknown || c.Degraded.Status != metav1.ConditionTrue || c.Degraded.Reason != "Unknown" {
		t.Errorf("node-c = %+v", c)
	}
	var text bytes.Buffer
	if err := WriteText(&text, &Report{Target: "revgate", Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "node-a  kube-system/revgate-node-a  4         true   True: revision 5 failed with DependencyUnhealthy, serving revision 4") ||
		!strings.Contains(text.String(), "node-c  kube-system/revgate-node-c  4         true   True: revision 5 failed with Unknown, serving the previous revision\n") {
		t.Errorf("text:\n%s", text.String())
	}
}
