package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/revisions"
)

// liveServeBound is how soon after the live endpoints file is written its
// endpoints must answer.
const liveServeBound = time.Second

// TestLiveEndpointsUnderLoad scales the Service's endpoints through the live
// endpoints file while clients send requests: A → A+B, then A+B → B, and A
// is stopped once its removal was applied. No request fails, B answers
// within a second of the write, and no revision is cut: the proxy that
// started with revision 1 serves throughout.
func TestLiveEndpointsUnderLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		healthCheck bool
	}{
		{"ingress", false},
		{"health-checked", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a, b := startUpstream(t, "A"), startUpstream(t, "B")
			file := e.layout.EndpointsFile()
			e.startSupervise()
			rev, _ := e.install(installSpec{source: source(tc.healthCheck, a.addr).Write(t), extra: []string{"--endpoints-file=" + file}})
			if rev != 1 {
				t.Fatalf("first install is revision %d", rev)
			}
			e.waitGood(1, "A")

			stop := make(chan struct{})
			results := e.load(loadWorkers, stop)
			time.Sleep(time.Second)

			// Scale up: A → A+B.
			up := e.writeLive(t, source(tc.healthCheck, a.addr, b.addr))
			upAfter := e.waitAnswer(t, "B", up)
			e.waitLiveEndpoints(t, a.addr, b.addr)
			time.Sleep(time.Second)

			// Scale down: A+B → B, then stop A once that is applied.
			down := e.writeLive(t, source(tc.healthCheck, b.addr))
			downAfter := e.waitLiveEndpoints(t, b.addr).Sub(down)
			a.stop()
			time.Sleep(2 * time.Second)
			close(stop)
			res := <-results

			t.Logf("live-endpoints scenario=%s scale-up-served-ms=%d scale-down-applied-ms=%d", tc.name, upAfter.Milliseconds(), downAfter.Milliseconds())
			checkLoad(t, "live-endpoints-"+tc.name, res)
			if res.bodies["A"] == 0 || res.bodies["B"] == 0 {
				t.Errorf("answers by upstream %v: want A and B to have served", res.bodies)
			}
			if upAfter > liveServeBound {
				t.Errorf("B answered %s after the endpoints file was written, want within %s", upAfter, liveServeBound)
			}
			// A answers no more.
			for i := 0; i < 10; i++ {
				if r := get("http://" + e.httpAddr + "/after"); r.err != nil || r.status != http.StatusOK || !strings.HasPrefix(r.body, "B ") {
					t.Fatalf("after scaling down: %d %q %v", r.status, r.body, r.err)
				}
			}
			e.checkNoNewRevision(t, 1)
		})
	}
}

// writeLive writes the live endpoints file for the upstreams of c, as the
// controller does, and returns when it was written.
func (e *env) writeLive(t *testing.T, c e2etest.Config) time.Time {
	t.Helper()
	slices, err := c.Slices()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if err := config.WriteEndpointsFile(e.layout.EndpointsFile(), slices); err != nil {
		t.Fatal(err)
	}
	return at
}

// waitAnswer polls the gateway until upstream name answers and returns how
// long after since that was.
func (e *env) waitAnswer(t *testing.T, name string, since time.Time) time.Duration {
	t.Helper()
	deadline := since.Add(30 * time.Second)
	for {
		r := get("http://" + e.httpAddr + "/probe")
		if r.err == nil && r.status == http.StatusOK && strings.HasPrefix(r.body, name+" ") {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered; last: %d %q %v", name, r.status, r.body, r.err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLiveEndpoints waits until /debug/config/routes shows exactly addrs
// as the route's endpoints and returns when it did.
func (e *env) waitLiveEndpoints(t *testing.T, addrs ...string) time.Time {
	t.Helper()
	addrs = slices.Sorted(slices.Values(addrs))
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if got, err := e.routeEndpoints(); err == nil && slices.Equal(got, addrs) {
			return time.Now()
		} else {
			last = fmt.Sprintf("%v %v", got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("route endpoints never became %v; last: %s", addrs, last)
	return time.Time{}
}

// routeEndpoints are the endpoints of the only route's only backend, as the
// gateway reports them.
func (e *env) routeEndpoints() ([]string, error) {
	resp, err := httpClient.Get("http://" + e.adminAddr + "/debug/config/routes")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var routes []struct {
		Backends []struct {
			Endpoints []struct {
				Address string `json:"address"`
			} `json:"endpoints"`
		} `json:"backends"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&routes); err != nil {
		return nil, err
	}
	if len(routes) != 1 || len(routes[0].Backends) != 1 {
		return nil, fmt.Errorf("routes %+v", routes)
	}
	out := []string{}
	for _, ep := range routes[0].Backends[0].Endpoints {
		out = append(out, ep.Address)
	}
	slices.Sort(out)
	return out, nil
}

// checkNoNewRevision fails unless revision rev is the only one installed,
// published and started, and its proxy started once.
func (e *env) checkNoNewRevision(t *testing.T, rev int) {
	t.Helper()
	list, err := e.layout.List(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(list.Revisions, []int{rev}) {
		t.Errorf("revisions installed %v, want only %d", list.Revisions, rev)
	}
	if n, _ := e.published(); n != rev {
		t.Errorf("published revision %d, want %d", n, rev)
	}
	recs, err := revisions.ReadTerminationRecords(e.layout.TerminationLog)
	if err != nil {
		t.Fatal(err)
	}
	var starts []string
	for _, r := range recs {
		if r.Type == revisions.RecordStart {
			starts = append(starts, fmt.Sprintf("revision %d pid %d", r.Revision, r.PID))
		}
	}
	if len(starts) != 1 || !strings.HasPrefix(starts[0], fmt.Sprintf("revision %d ", rev)) {
		t.Errorf("proxy starts %v, want revision %d started once", starts, rev)
	}
}
