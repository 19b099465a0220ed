package server

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/config"
)

// irDoc renders an IngressRoute; fqdn "-" makes a root without fqdn, ""
// a vertex. Routes are "match -> service:port" or "match => delegate".
func irDoc(ns, name, fqdn string, routes ...string) string {
	s := "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n"
	switch fqdn {
	case "":
	case "-":
		s += "  virtualhost: {}\n"
	default:
		s += "  virtualhost:\n    fqdn: " + fqdn + "\n"
	}
	s += "  routes:\n"
	for _, r := range routes {
		if m, d, ok := strings.Cut(r, " => "); ok {
			s += "  - match: " + m + "\n    delegate:\n      name: " + d + "\n"
			continue
		}
		m, svc, _ := strings.Cut(r, " -> ")
		name, port, _ := strings.Cut(svc, ":")
		s += "  - match: " + m + "\n    services:\n    - name: " + name + "\n      port: " + port + "\n"
	}
	return s
}

// The IngressRoute gauges of the Contour design, under revgate's prefix,
// computed from the object statuses of a snapshot built from real files.
func TestIngressRouteMetrics(t *testing.T) {
	home := "apiVersion: v1\nkind: Service\nmetadata:\n  name: home\n  namespace: roots\nspec:\n  ports:\n  - port: 8080\n"
	docs := []string{
		home,
		// A valid root delegating /prefix to a valid vertex and /bar to a
		// vertex routing outside its prefix (invalid).
		irDoc("roots", "example", "example.com", "/foo -> home:8080", "/prefix => delegated", "/bar => stray"),
		irDoc("roots", "delegated", "", "/prefix -> home:8080"),
		irDoc("roots", "stray", "", "/elsewhere -> home:8080"),
		// No root delegates to it.
		irDoc("roots", "lonely", "", "/x -> home:8080"),
		// A root without fqdn.
		irDoc("roots", "nofqdn", "-", "/ -> home:8080"),
		// A root outside --root-namespaces.
		irDoc("finance", "fin", "fin.com", "/ -> home:8080"),
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := config.Build(config.Options{Dirs: []string{dir}, RootNamespaces: []string{"roots"}})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	m.setSnapshot(snap)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	got := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "revgate_ingressroute_") {
			k, v, _ := strings.Cut(line, " ")
			got[k] = v
		}
	}
	want := map[string]string{
		`revgate_ingressroute_total{namespace="roots"}`:                             "5",
		`revgate_ingressroute_total{namespace="finance"}`:                           "1",
		`revgate_ingressroute_root_total{namespace="roots"}`:                        "2",
		`revgate_ingressroute_root_total{namespace="finance"}`:                      "1",
		`revgate_ingressroute_orphaned_total{namespace="roots"}`:                    "1",
		`revgate_ingressroute_valid_total{namespace="roots",vhost="example.com"}`:   "2",
		`revgate_ingressroute_invalid_total{namespace="roots",vhost="example.com"}`: "1",
		`revgate_ingressroute_invalid_total{namespace="roots",vhost=""}`:            "1",
		`revgate_ingressroute_invalid_total{namespace="finance",vhost="fin.com"}`:   "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
		delete(got, k)
	}
	ts, err := strconv.ParseFloat(got["revgate_ingressroute_dagrebuild_timestamp"], 64)
	if err != nil || int64(ts) != snap.BuiltAt.Unix() {
		t.Errorf("dagrebuild_timestamp %q, want %d", got["revgate_ingressroute_dagrebuild_timestamp"], snap.BuiltAt.Unix())
	}
	delete(got, "revgate_ingressroute_dagrebuild_timestamp")
	if len(got) != 0 {
		t.Errorf("unexpected series %v\n%s", got, body)
	}

	// A new snapshot replaces the series: nothing of the old one is left.
	empty := *snap
	empty.Objects = nil
	m.setSnapshot(&empty)
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if b := rec.Body.String(); strings.Contains(b, "revgate_ingressroute_total{") {
		t.Errorf("stale series after a new snapshot:\n%s", b)
	}
}
