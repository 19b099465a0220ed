package e2enode

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/revisions"
)

// gatewayHost is the virtual host of the IngressRoute configurations.
const gatewayHost = "gateway.e2e"

// source is the suite's gateway configuration for one upstream: an Ingress
// for every host, or with healthCheck an IngressRoute for gatewayHost.
func source(up *upstream, healthCheck bool) e2etest.Config {
	return e2etest.Config{Upstreams: []string{up.addr}, HealthCheck: healthCheck, Host: gatewayHost}
}

// good is the revision serving between scenarios, which every fallback
// must put back.
type good struct {
	rev        int
	host, name string
}

// TestNode runs the startup-monitor test plan on the node, one scenario
// after another (they share the node, its ports and its revisions): each
// bad revision must fall back to the good one with the reason on the mirror
// pod, in `revgate status` and in an Event, and the good revision must serve
// again.
func TestNode(t *testing.T) {
	n := requireNode(t)
	t.Logf("node bring-up (hack/node/up.sh): %.1fs", n.upSeconds)
	v1 := newUpstream(t, "v1")
	v1.start(t)
	v2 := newUpstream(t, "v2")
	goodSource := source(v1, false).Write(t)
	var cur good

	if !t.Run("revision-1", func(t *testing.T) {
		rev, published := n.install(t, installSpec{source: goodSource})
		if rev != 1 {
			t.Fatalf("first install wrote revision %d", rev)
		}
		since := n.waitGood(t, rev, "", "v1")
		t.Logf("revision 1: serving %.1fs and last-known-good %.1fs after publishing it",
			since.Sub(published).Seconds(), time.Since(published).Seconds())
		cur = good{rev: rev, name: "v1"}
	}) {
		t.Fatal("revision 1 never became good; the other scenarios need it")
	}
	defer logLoadTable(t)

	// A good revision replaces the serving one under constant load.
	t.Run("good-rollout", func(t *testing.T) {
		defer startLoad(t, "good-rollout").stopNoFailures(t)
		rev, published := n.install(t, installSpec{source: goodSource})
		since := n.waitGood(t, rev, "", "v1")
		t.Logf("revision %d: serving %.1fs and last-known-good %.1fs after publishing it",
			rev, since.Sub(published).Seconds(), time.Since(published).Seconds())
		cur = good{rev: rev, name: "v1"}
	})

	// The seed's "badly formatted or invalid pod manifest": the operand never
	// starts; NeverStartedUp, not retried.
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
	}{
		{"never-started-up/missing-image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "revgate:no-such-image" }},
		{"never-started-up/missing-command", func(p *corev1.Pod) { p.Spec.Containers[0].Command[0] = "/no-such-binary" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer startLoad(t, tc.name).stopNoFailures(t)
			rev, published := n.install(t, installSpec{source: goodSource, mutate: e2etest.MutatePod(node.layout.Target, tc.mutate)})
			fb := n.waitFallback(t, rev, cur.rev, cur.name, published)
			if fb.reason != revisions.ReasonNeverStartedUp {
				t.Errorf("fallback reason %s, want %s", fb.reason, revisions.ReasonNeverStartedUp)
			}
			n.checkFailed(t, rev, revisions.ReasonNeverStartedUp)
		})
	}

	// The seed's "bad config observer output" (a flag the binary does not
	// know) and "bad revisioned ConfigMaps" (a configuration it cannot load):
	// the operand exits at start; CrashLooping, not retried.
	for _, tc := range []struct {
		name string
		arg  string
	}{
		{"crash-looping/flags", "--no-such-flag"},
		{"crash-looping/config", "--config-dir=/no-such-folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer startLoad(t, tc.name).stopNoFailures(t)
			rev, published := n.install(t, installSpec{source: goodSource, proxyArgs: []string{tc.arg}})
			fb := n.waitFallback(t, rev, cur.rev, cur.name, published)
			if fb.reason != revisions.ReasonCrashLooping {
				t.Errorf("fallback reason %s, want %s (%s)", fb.reason, revisions.ReasonCrashLooping, fb.message)
			}
			n.checkFailed(t, rev, revisions.ReasonCrashLooping)
		})
	}

	// The seed's post-start hook that never finishes: the operand is healthy
	// but never ready (object-level fallback off and a broken object);
	// NotReady, retried.
	t.Run("not-ready", func(t *testing.T) {
		defer startLoad(t, "not-ready").stopNoFailures(t)
		rev, published := n.install(t, installSpec{
			source:    goodSource,
			proxyArgs: []string{"--fallback=off"},
			mutate:    e2etest.AppendConfig(e2etest.BrokenIngress),
		})
		fb := n.waitFallback(t, rev, cur.rev, cur.name, published)
		if fb.reason != revisions.ReasonNotReady {
			t.Fatalf("fallback reason %s, want %s (%s)", fb.reason, revisions.ReasonNotReady, fb.message)
		}
		if fb.annotations[revisions.AnnotationNextRetry] == "" {
			t.Errorf("fallback for a retried reason lacks %s", revisions.AnnotationNextRetry)
		}
		n.checkFailed(t, rev, revisions.ReasonNotReady)
		first, err := strconv.Atoi(fb.annotations[revisions.AnnotationFallbackAttempt])
		if err != nil {
			t.Fatalf("fallback annotation %s: %v", revisions.AnnotationFallbackAttempt, err)
		}

		waitFor(t, waitLong, fmt.Sprintf("the retry to publish revision %d again", rev), func() (bool, string) {
			pub := n.newest()
			return pub == rev, fmt.Sprintf("published revision %d", pub)
		})
		retried := time.Now()
		t.Logf("revision %d: retried %.1fs after the fallback was published", rev, retried.Sub(fb.decided).Seconds())
		waitFor(t, waitLong, "the retry to fail again", func() (bool, string) {
			r := n.state(t).Revisions[rev]
			return r != nil && r.Attempts > first && r.Outcome == revisions.OutcomeFailed, fmt.Sprintf("state %+v", r)
		})
		fb = n.waitFallback(t, rev, cur.rev, cur.name, retried)
		if a := fb.annotations[revisions.AnnotationFallbackAttempt]; a != strconv.Itoa(first+1) {
			t.Errorf("second fallback annotated attempt %q, want %d", a, first+1)
		}
		n.checkFailed(t, rev, revisions.ReasonNotReady)
	})

	// The seed's bad etcd smoke test: the revision's upstream is down;
	// DependencyUnhealthy, retried, and good once the upstream is back.
	t.Run("dependency-unhealthy", func(t *testing.T) {
		defer startLoad(t, "dependency-unhealthy").stopNoFailures(t)
		v2.stop()
		rev, published := n.install(t, installSpec{source: source(v2, true).Write(t)})
		fb := n.waitFallback(t, rev, cur.rev, cur.name, published)
		if fb.reason != revisions.ReasonDependencyUnhealthy {
			t.Fatalf("fallback reason %s, want %s (%s)", fb.reason, revisions.ReasonDependencyUnhealthy, fb.message)
		}
		n.checkFailed(t, rev, revisions.ReasonDependencyUnhealthy)

		v2.start(t)
		back := time.Now()
		since := n.waitGood(t, rev, gatewayHost, "v2")
		t.Logf("revision %d: serving %.1fs and last-known-good %.1fs after its upstream came back",
			rev, since.Sub(back).Seconds(), time.Since(back).Seconds())
		r := n.state(t).Revisions[rev]
		if r.Outcome != revisions.OutcomeGood || r.NextRetry != nil || r.Attempts < 2 {
			t.Errorf("revision %d after its upstream came back: %+v", rev, r)
		}
		cur = good{rev: rev, host: gatewayHost, name: "v2"}
	})

	// A node restart in the middle of a rollout, while the new revision
	// serves but is not yet last-known-good: kubelet and containerd are
	// stopped and started again, with the containers left running (a
	// service restart) or killed (a power cut). The monitor resumes and the
	// revision becomes good.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"node-restart/services", nil},
		{"node-restart/power-cut", []string{"--kill-pods"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer startLoad(t, tc.name).stop(t)
			v1.start(t)
			rev, published := n.install(t, installSpec{
				source: goodSource,
				// A long streak of ready probes holds the rollout open for the restart.
				monitorArgs: []string{"--ready-successes=40", "--fallback-timeout=2m"},
			})
			waitFor(t, waitLong, fmt.Sprintf("revision %d to serve", rev), func() (bool, string) {
				return serving(rev, "", "v1")
			})
			if l := n.lkg(); l == rev {
				t.Fatalf("revision %d became last-known-good before the restart; the rollout window is too short", rev)
			}
			t.Logf("revision %d serving %.1fs after publishing; restarting the node", rev, time.Since(published).Seconds())
			restart := time.Now()
			if err := script(n.repo, n.vars["NODE_ROOT"], "restart.sh", tc.args...); err != nil {
				t.Fatalf("hack/node/restart.sh: %v", err)
			}
			t.Logf("kubelet and containerd restarted in %.1fs", time.Since(restart).Seconds())
			since := n.waitGood(t, rev, "", "v1")
			t.Logf("revision %d: serving %.1fs and last-known-good %.1fs after the restart began",
				rev, since.Sub(restart).Seconds(), time.Since(restart).Seconds())
			starts := n.startsSince(t, rev, restart)
			t.Logf("revision %d: %d start records after the restart began", rev, starts)
			if tc.name == "node-restart/power-cut" && starts == 0 {
				t.Errorf("revision %d: no start record after the power cut; the kill missed the gateway container", rev)
			}
			r := n.state(t).Revisions[rev]
			if r == nil || r.Outcome != revisions.OutcomeGood || r.DecidedAt.Before(restart) {
				t.Errorf("revision %d after the restart: %+v, want Good decided after the restart", rev, r)
			}
			cur = good{rev: rev, name: "v1"}
		})
	}
}
