package fallbackstatus

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/revisions"
)

// ServingPod picks the serving pod among the mirror pods of one target on
// one node (the pods labelled app=<target> there).
//
// revgate publishes a new revision beside the serving one, in a second
// static pod, so a node runs two mirror pods while a revision rolls out:
// the one of the older revision serves until the newer one is judged good,
// after which the older one is removed; after a fallback the newer one is
// removed and the older one carries the fallback annotations. The serving
// pod is therefore the one with the lowest revision label; pods without a
// usable revision label come last, ties go to the pod with a fallback, then
// by name. It returns false for no pods.
func ServingPod[P metav1.Object](pods []P) (P, bool) {
	var zero P
	if len(pods) == 0 {
		return zero, false
	}
	type cand struct {
		pod      P
		rev      int
		fallback bool
	}
	cs := make([]cand, len(pods))
	for i, p := range pods {
		rev, err := strconv.Atoi(p.GetLabels()[revisions.RevisionLabel])
		if err != nil || rev <= 0 {
			rev = 0
		}
		_, fb := p.GetAnnotations()[revisions.AnnotationFallbackForRevision]
		cs[i] = cand{p, rev, fb}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		switch {
		case (a.rev > 0) != (b.rev > 0):
			return a.rev > 0
		case a.rev != b.rev:
			return a.rev < b.rev
		case a.fallback != b.fallback:
			return a.fallback
		}
		return a.pod.GetName() < b.pod.GetName()
	})
	return cs[0].pod, true
}

// ForNode reads the fallback in effect on one node from its mirror pods of
// one target: the annotations of the serving pod (see ServingPod). It
// returns nil and no error when no pod serves or the serving one carries no
// fallback.
func ForNode[P metav1.Object](pods []P) (*Fallback, error) {
	p, ok := ServingPod(pods)
	if !ok {
		return nil, nil
	}
	return Parse(p.GetAnnotations())
}
