package monitor

import (
	"os"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/revisions"
)

// randomUUID is a version 4 UUID, what k8s.io/apimachinery's uuid.NewUUID
// (and OpenShift's startup monitor through it) gives.
var randomUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func uidOf(t *testing.T, manifest []byte) string {
	t.Helper()
	var pod corev1.Pod
	if err := yamlUnmarshal(manifest, &pod); err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

// The manifest put back gets a fresh random metadata.uid every time, as
// OpenShift's startup monitor writes it, so the kubelet treats the pod put
// back as a new pod rather than as the one it ran from the same file before.
func TestFallbackManifestGetsAFreshUID(t *testing.T) {
	src := []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: revgate\n  uid: 11111111-1111-1111-1111-111111111111\n  labels:\n    revision: \"1\"\nspec:\n  containers:\n  - name: proxy\n    image: revgate\n")
	fb := &fallbackstatus.Fallback{ForRevision: 2, Reason: revisions.ReasonNotReady, Message: "m"}
	seen := map[string]bool{uidOf(t, src): true}
	for i := 0; i < 3; i++ {
		out, err := annotateManifest(src, fb)
		if err != nil {
			t.Fatal(err)
		}
		uid := uidOf(t, out)
		if !randomUUID.MatchString(uid) {
			t.Fatalf("uid %q is not a random UUID", uid)
		}
		if seen[uid] {
			t.Fatalf("uid %q used before", uid)
		}
		seen[uid] = true
	}
}

// Through the monitor: the published fallback manifest carries a uid the
// last-known-good revision's manifest does not have.
func TestFallbackPublishesAFreshUID(t *testing.T) {
	e := node12(t)
	e.record(revisions.RecordStart, 2, "")
	e.op.set(func(o *operand) { o.health = 500 })
	if e.stepFor(e.monitor(2), DefaultFallbackTimeout+5*time.Second) {
		t.Fatal("finished with a retry pending")
	}
	rev, fb, data := e.published()
	if rev != 1 || fb == nil {
		t.Fatalf("published %d %+v, want the fallback to revision 1", rev, fb)
	}
	orig, err := os.ReadFile(e.l.RevisionPodManifest(1))
	if err != nil {
		t.Fatal(err)
	}
	if uid := uidOf(t, data); uid == "" || uid == uidOf(t, orig) {
		t.Fatalf("published uid %q, revision 1's %q", uid, uidOf(t, orig))
	}
}
