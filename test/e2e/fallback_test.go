package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/revisions"
)

// checkFailed checks the state file's record of a failed revision: outcome
// Failed with reason, and a pending retry exactly when the reason is retried.
func (e *env) checkFailed(rev int, reason string) *revisions.RevisionState {
	e.t.Helper()
	st := e.state()
	r := st.Revisions[rev]
	if r == nil {
		e.t.Fatalf("state file has no revision %d", rev)
	}
	if r.Outcome != revisions.OutcomeFailed || r.Reason != reason {
		e.t.Fatalf("revision %d: outcome %s reason %q, want %s %q", rev, r.Outcome, r.Reason, revisions.OutcomeFailed, reason)
	}
	if len(r.Fallbacks) == 0 || r.Fallbacks[len(r.Fallbacks)-1].Reason != reason {
		e.t.Errorf("revision %d: fallback history %+v lacks %s", rev, r.Fallbacks, reason)
	}
	if retried := r.NextRetry != nil; retried != revisions.Retried(reason) {
		e.t.Errorf("revision %d (%s): next retry %v, want a retry pending = %v", rev, reason, r.NextRetry, revisions.Retried(reason))
	}
	if e.lkg() == rev {
		e.t.Errorf("failed revision %d is last-known-good", rev)
	}
	e.checkStatus(rev, reason)
	return r
}

// statusReport is the part of `revgate status -o json` the suite reads.
type statusReport struct {
	Published *struct {
		Revision int `json:"revision"`
		Fallback *struct {
			ForRevision int    `json:"forRevision"`
			Reason      string `json:"reason"`
		} `json:"fallback"`
	} `json:"published"`
	LastKnownGood  int `json:"lastKnownGood"`
	PendingRetries []struct {
		Revision int `json:"revision"`
	} `json:"pendingRetries"`
}

// checkStatus checks that `revgate status` tells the fallback from the
// failed revision as the files do.
func (e *env) checkStatus(failed int, reason string) {
	e.t.Helper()
	out, err := revgate(e.t, "status", "-o", "json", "--target="+e.layout.Target,
		"--resource-dir="+e.layout.ResourceDir, "--manifests-dir="+e.layout.ManifestsDir)
	if err != nil {
		e.t.Errorf("revgate status: %v\n%s", err, out)
		return
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		e.t.Errorf("revgate status -o json: %v\n%s", err, out)
		return
	}
	if rep.Published == nil || rep.Published.Fallback == nil ||
		rep.Published.Fallback.ForRevision != failed || rep.Published.Fallback.Reason != reason {
		e.t.Errorf("revgate status does not show the fallback from revision %d with %s:\n%s", failed, reason, out)
	}
	if rep.LastKnownGood != e.lkg() {
		e.t.Errorf("revgate status: last-known-good %d, the link says %d", rep.LastKnownGood, e.lkg())
	}
	pending := false
	for _, r := range rep.PendingRetries {
		pending = pending || r.Revision == failed
	}
	if pending != revisions.Retried(reason) {
		e.t.Errorf("revgate status: retry of revision %d pending = %v, want %v:\n%s", failed, pending, revisions.Retried(reason), out)
	}
}

// checkNotRetried waits past the retry schedule and checks that the failed
// revision was not published again.
func (e *env) checkNotRetried(failed, serving int, name string) {
	e.t.Helper()
	deadline := time.Now().Add(retryInitial + 3*time.Second)
	for time.Now().Before(deadline) {
		if n := e.newest(); n != serving {
			e.t.Fatalf("revision %d failed for a reason that is not retried, but revision %d was published again", failed, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ok, detail := e.serving(serving, name); !ok {
		e.t.Fatalf("revision %d no longer serving: %s", serving, detail)
	}
	if r := e.state().Revisions[failed]; r == nil || r.NextRetry != nil || r.Outcome != revisions.OutcomeFailed {
		e.t.Fatalf("revision %d state after the retry schedule: %+v", failed, r)
	}
}

// badManifests are operand manifests that never run: the seed's "badly
// formatted or invalid pod manifest".
var badManifests = []struct {
	name   string
	mutate func(t *testing.T, revDir string)
}{
	{"missing-binary", e2etest.MutatePod("revgate", func(pod *corev1.Pod) {
		pod.Spec.Containers[0].Command[0] = "/nonexistent/revgate"
	})},
	{"no-command", e2etest.MutatePod("revgate", func(pod *corev1.Pod) {
		pod.Spec.Containers[0].Command = nil
		pod.Spec.Containers[0].Args = nil
	})},
	{"not-a-pod", func(t *testing.T, revDir string) {
		// Metadata intact (the monitor must still see revision N), spec
		// of the wrong type: no runtime can run it.
		path := filepath.Join(revDir, "revgate-pod.yaml")
		pod, err := e2etest.ReadPod(path)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := yaml.Marshal(struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}{"v1", "Pod", pod.ObjectMeta})
		if err != nil {
			t.Fatal(err)
		}
		writeRaw(t, path, string(meta)+"spec:\n  containers: this is not a list\n")
	}},
	{"syntax-error", func(t *testing.T, revDir string) {
		writeRaw(t, filepath.Join(revDir, "revgate-pod.yaml"), "metadata: {labels: {revision: \"2\"\nspec: [[[\n")
	}},
}

// TestInvalidManifest: a badly formatted or invalid operand manifest never
// starts; the monitor falls back with NeverStartedUp and does not retry.
func TestInvalidManifest(t *testing.T) {
	t.Parallel()
	for _, tc := range badManifests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			up := e.startGood()
			rev, published := e.install(installSpec{source: source(false, up.addr).Write(t), mutate: tc.mutate})
			e.waitFallback(rev, 1, revisions.ReasonNeverStartedUp, "v1")
			logRecovery(t, "invalid-manifest-"+tc.name, published)
			e.checkFailed(rev, revisions.ReasonNeverStartedUp)
			e.checkNotRetried(rev, 1, "v1")
		})
	}
}

// TestCrashLooping: the operand exits at start, because of an unknown flag
// (the seed's "bad config observer output") or a configuration it cannot
// load (its "bad revisioned ConfigMaps"); the monitor falls back with
// CrashLooping and does not retry.
func TestCrashLooping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		arg  string
	}{
		{"flags", "--proxy-arg=--no-such-flag"},
		{"config", "--proxy-arg=--config-dir=/nonexistent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			up := e.startGood()
			rev, published := e.install(installSpec{source: source(false, up.addr).Write(t), extra: []string{tc.arg}})
			e.waitFallback(rev, 1, revisions.ReasonCrashLooping, "v1")
			logRecovery(t, "crashloop-"+tc.name, published)
			e.checkFailed(rev, revisions.ReasonCrashLooping)
			e.checkNotRetried(rev, 1, "v1")
		})
	}
}

// TestNotReady: the operand starts and is healthy but never ready (object
// fallback off and a broken object); the monitor falls back with NotReady
// and retries on schedule, counting attempts in the state file.
func TestNotReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := e.startGood()
	rev, published := e.install(installSpec{
		source: source(false, up.addr).Write(t),
		extra:  []string{"--proxy-arg=--fallback=off"},
		mutate: e2etest.AppendConfig(e2etest.BrokenIngress),
	})
	ann := e.waitFallback(rev, 1, revisions.ReasonNotReady, "v1")
	logRecovery(t, "not-ready", published)
	r := e.checkFailed(rev, revisions.ReasonNotReady)
	if ann[revisions.AnnotationNextRetry] == "" {
		t.Errorf("fallback for a retried reason lacks %s", revisions.AnnotationNextRetry)
	}
	first := r.Attempts

	// The retry publishes the revision again; it fails again.
	waitFor(t, waitLong, "the retry to publish revision 2 again", func() (bool, string) {
		n := e.newest()
		return n == rev, fmt.Sprintf("published revision %d", n)
	})
	retried := time.Now()
	waitFor(t, waitLong, "the second fallback", func() (bool, string) {
		r := e.state().Revisions[rev]
		return r != nil && r.Attempts > first && len(r.Fallbacks) >= 2,
			fmt.Sprintf("state %+v", r)
	})
	ann = e.waitFallback(rev, 1, revisions.ReasonNotReady, "v1")
	logRecovery(t, "not-ready-retry", retried)
	if a := ann[revisions.AnnotationFallbackAttempt]; a != strconv.Itoa(first+1) {
		t.Errorf("second fallback annotated attempt %q, want %d", a, first+1)
	}
	r = e.checkFailed(rev, revisions.ReasonNotReady)
	if r.Attempts != first+1 {
		t.Errorf("attempts %d after one retry, want %d", r.Attempts, first+1)
	}
}

// TestDependencyUnhealthy: every upstream of the new revision is down; the
// monitor falls back with DependencyUnhealthy and retries, and the revision
// becomes good once the upstreams are back.
func TestDependencyUnhealthy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGood()
	v2 := downUpstream(t, "v2")
	rev, published := e.install(installSpec{source: source(true, v2.addr).Write(t)})
	e.waitFallback(rev, 1, revisions.ReasonDependencyUnhealthy, "v1")
	logRecovery(t, "dependency-unhealthy", published)
	e.checkFailed(rev, revisions.ReasonDependencyUnhealthy)

	v2.start(t)
	e.waitGood(rev, "v2")
	r := e.state().Revisions[rev]
	if r.Outcome != revisions.OutcomeGood || r.NextRetry != nil || r.Attempts < 2 {
		t.Fatalf("revision %d after the upstreams came back: %+v", rev, r)
	}
}

func writeRaw(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
