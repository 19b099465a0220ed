package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// teamConfig is a two-team configuration: team-a serves a.example from its
// Service "web", team-b serves b.example from its Service named bService.
// A team-b Ingress pointing at a Service that does not exist is the broken
// team object.
func teamConfig(aUpstream, bUpstream, bService string) string {
	svc := func(ns, name, addr string) string {
		host, port, _ := strings.Cut(addr, ":")
		return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  ports: [{name: http, port: 80, targetPort: %[4]s}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[2]s-1
  namespace: %[1]s
  labels: {kubernetes.io/service-name: %[2]s}
addressType: IPv4
ports: [{name: http, port: %[4]s}]
endpoints: [{addresses: ["%[3]s"]}]
---
`, ns, name, host, port)
	}
	ing := func(ns, host, service string) string {
		return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: %[1]s}
spec:
  ingressClassName: revgate
  rules:
  - host: %[2]s
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: %[3]s, port: {number: 80}}}}
---
`, ns, host, service)
	}
	cfg := svc("team-a", "web", aUpstream) + ing("team-a", "a.example", "web") + ing("team-b", "b.example", bService)
	if bUpstream != "" {
		cfg += svc("team-b", "web", bUpstream)
	}
	return cfg
}

// writeRevision writes revision n of target revgate under res as the
// installer lays it out (the configuration as configmaps/config/teams.yaml
// and an operand manifest carrying the revision label).
func writeRevision(t *testing.T, res string, n int, cfg string) string {
	t.Helper()
	dir := filepath.Join(res, fmt.Sprintf("revgate-pod-%d", n))
	if err := os.MkdirAll(filepath.Join(dir, "configmaps", "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, filepath.Join(dir, "configmaps", "config", "teams.yaml"), cfg)
	writeRaw(t, filepath.Join(dir, "revgate-pod.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: revgate\n  labels: {revision: \"%d\"}\n", n))
	return dir
}

// TestObjectFallbackThroughSockets: revision 2 breaks one team's Ingress
// (its Service is gone). Under exclude the other team's routes, including a
// change made in revision 2, are served and the broken team's host answers
// 404; under backfill the broken team's host answers from its version in the
// last-known-good revision 1. Real proxy process, real upstreams, real
// sockets; readiness stays green in both modes.
func TestObjectFallbackThroughSockets(t *testing.T) {
	t.Parallel()
	a1, a2, b := startUpstream(t, "team-a-v1"), startUpstream(t, "team-a-v2"), startUpstream(t, "team-b-v1")
	res := filepath.Join(t.TempDir(), "resources")
	writeRevision(t, res, 1, teamConfig(a1.addr, b.addr, "web"))
	rev2 := writeRevision(t, res, 2, teamConfig(a2.addr, "", "web"))
	l := revisions.Layout{Target: "revgate", ResourceDir: res}
	if err := l.SetLastKnownGood(revisions.OS(), 1); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		mode       model.FallbackMode
		bStatus    int
		bBody      string
		backfilled bool
	}{
		{model.FallbackExclude, http.StatusNotFound, "", false},
		{model.FallbackBackfill, http.StatusOK, "team-b-v1 ", true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			httpAddr, adminAddr := freeAddr(t), freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			cmd := exec.CommandContext(ctx, revgateBin, "proxy", "--config-dir="+rev2, "--revision=2",
				"--fallback="+string(tc.mode), "--http-addr="+httpAddr, "--https-addr=", "--admin-addr="+adminAddr,
				"--termination-log=")
			var logs strings.Builder
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); _ = cmd.Wait() }()
			waitFor(t, 30*time.Second, "the proxy to be ready", func() (bool, string) {
				r := get("http://" + adminAddr + "/readyz")
				return r.err == nil && r.status == http.StatusOK, fmt.Sprintf("%d %v\n%s", r.status, r.err, logs.String())
			})

			if r := getHost("http://"+httpAddr+"/x", "a.example"); r.status != http.StatusOK || !strings.HasPrefix(r.body, "team-a-v2 ") {
				t.Errorf("a.example: %d %q %v, want revision 2's team-a upstream", r.status, r.body, r.err)
			}
			r := getHost("http://"+httpAddr+"/x", "b.example")
			if r.status != tc.bStatus || !strings.HasPrefix(r.body, tc.bBody) {
				t.Errorf("b.example: %d %q %v, want %d %q", r.status, r.body, r.err, tc.bStatus, tc.bBody)
			}

			var rep model.FallbackReport
			getJSON(t, "http://"+adminAddr+"/debug/config/fallback", &rep)
			if rep.Status != model.FallbackTriggered || !hasObject(rep.BrokenObjects, "Ingress", "team-b", "web") {
				t.Errorf("fallback report: %+v", rep)
			}
			if got := hasObject(rep.BackfilledObjects, "Ingress", "team-b", "web"); got != tc.backfilled {
				t.Errorf("team-b Ingress backfilled = %v, want %v: %+v", got, tc.backfilled, rep.BackfilledObjects)
			}
			if v := get("http://" + adminAddr + "/readyz?verbose"); v.status != http.StatusOK || !strings.Contains(v.body, "fallback") {
				t.Errorf("readyz?verbose: %d %q", v.status, v.body)
			}
		})
	}
}

func getHost(url, host string) response {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{err: err}
	}
	req.Host = host
	resp, err := httpClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(body), err: err}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decode %s: %v", url, err)
	}
}

func hasObject(objs []model.FallbackObject, kind, ns, name string) bool {
	for _, o := range objs {
		if o.Kind == kind && o.Namespace == ns && o.Name == name {
			return true
		}
	}
	return false
}
