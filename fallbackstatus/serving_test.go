package fallbackstatus

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/revisions"
)

func mirror(name, rev string, fallbackFor string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "revgate"}, Annotations: map[string]string{}}
	if rev != "" {
		m.Labels[revisions.RevisionLabel] = rev
	}
	if fallbackFor != "" {
		m.Annotations[revisions.AnnotationFallbackForRevision] = fallbackFor
		m.Annotations[revisions.AnnotationFallbackReason] = revisions.ReasonCrashLooping
	}
	return m
}

func TestServingPod(t *testing.T) {
	for _, tt := range []struct {
		name string
		pods []*metav1.ObjectMeta
		want string
	}{
		{"none", nil, ""},
		{"one", []*metav1.ObjectMeta{mirror("revgate-n1", "4", "")}, "revgate-n1"},
		{"a rollout: the older revision serves", []*metav1.ObjectMeta{mirror("revgate-b-n1", "5", ""), mirror("revgate-n1", "4", "")}, "revgate-n1"},
		{"a retry beside a fallback", []*metav1.ObjectMeta{mirror("revgate-n1", "4", "5"), mirror("revgate-b-n1", "5", "")}, "revgate-n1"},
		{"no usable revision comes last", []*metav1.ObjectMeta{mirror("revgate-n1", "x", ""), mirror("revgate-b-n1", "9", "")}, "revgate-b-n1"},
		{"a tie goes to the fallback", []*metav1.ObjectMeta{mirror("revgate-n1", "4", ""), mirror("revgate-b-n1", "4", "5")}, "revgate-b-n1"},
		{"then to the name", []*metav1.ObjectMeta{mirror("revgate-n1", "4", ""), mirror("revgate-b-n1", "4", "")}, "revgate-b-n1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ServingPod(tt.pods)
			name := ""
			if ok {
				name = got.Name
			}
			if name != tt.want {
				t.Fatalf("serving %q, want %q", name, tt.want)
			}
		})
	}
}

func TestForNode(t *testing.T) {
	fb, err := ForNode([]*metav1.ObjectMeta{mirror("revgate-b-n1", "5", ""), mirror("revgate-n1", "4", "5")})
	if err != nil || fb == nil || fb.ForRevision != 5 || fb.Reason != revisions.ReasonCrashLooping {
		t.Fatalf("ForNode = %+v, %v", fb, err)
	}
	if fb, err := ForNode([]*metav1.ObjectMeta{mirror("revgate-n1", "4", "")}); fb != nil || err != nil {
		t.Fatalf("no fallback: %+v %v", fb, err)
	}
	if fb, err := ForNode[*metav1.ObjectMeta](nil); fb != nil || err != nil {
		t.Fatalf("no pods: %+v %v", fb, err)
	}
}
