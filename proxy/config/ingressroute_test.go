package config

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// ir renders an IngressRoute. fqdn "" makes a vertex. Routes are
// "/match -> svc:port[,svc:port]" or "/match => [ns/]name".
func ir(ns, name, fqdn string, routes ...string) string {
	s := "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n"
	if fqdn != "" {
		s += "  virtualhost:\n    fqdn: " + fqdn + "\n"
	}
	s += "  routes:\n"
	for _, r := range routes {
		if m, d, ok := strings.Cut(r, " => "); ok {
			s += "  - match: " + m + "\n    delegate:\n"
			if dns, dn, ok := strings.Cut(d, "/"); ok {
				s += "      namespace: " + dns + "\n      name: " + dn + "\n"
			} else {
				s += "      name: " + d + "\n"
			}
			continue
		}
		m, svcs, _ := strings.Cut(r, " -> ")
		s += "  - match: " + m + "\n    services:\n"
		for _, sv := range strings.Split(svcs, ",") {
			n, p, _ := strings.Cut(sv, ":")
			s += "    - name: " + n + "\n      port: " + p + "\n"
		}
	}
	return s
}

func svcIn(ns ...string) []string {
	var out []string
	for _, n := range ns {
		out = append(out, service(n, "app", "http:80:8080"))
	}
	return out
}

func TestDelegation(t *testing.T) {
	type want struct {
		status model.Status
		root   string // name of the root for valid objects
		desc   string // substring of the description
	}
	tests := []struct {
		name   string
		opts   Options
		docs   []string
		want   map[string]want // by "ns/name"
		routes []string        // "host path" served
	}{
		{
			name: "root with delegated child",
			docs: append(svcIn("infra", "team"), ir("infra", "root", "foo.com", "/ -> app:80", "/team => team/child"), ir("team", "child", "", "/team -> app:80", "/team/sub -> app:80")),
			want: map[string]want{
				"infra/root": {status: model.StatusValid, root: "root"},
				"team/child": {status: model.StatusValid, root: "root", desc: "delegated"},
			},
			routes: []string{"foo.com /", "foo.com /team", "foo.com /team/sub"},
		},
		{
			name: "diamond: a child reached twice from one root is walked once",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/x => p1", "/x/ => p2"), ir("a", "p1", "", "/x => child"), ir("a", "p2", "", "/x => child"), ir("a", "child", "", "/x -> app:80")),
			want: map[string]want{
				"a/child": {status: model.StatusValid, root: "root"},
			},
			routes: []string{"foo.com /x"},
		},
		{
			name:   "the design document's service spelling",
			docs:   append(svcIn("infra"), strings.Replace(ir("infra", "root", "foo.com", "/ -> app:80"), "services:", "service:", 1)),
			want:   map[string]want{"infra/root": {status: model.StatusValid, root: "root"}},
			routes: []string{"foo.com /"},
		},
		{
			name: "service and services both set",
			docs: append(svcIn("infra"), strings.Replace(ir("infra", "root", "foo.com", "/ -> app:80"), "    services:\n", "    service:\n    - name: app\n      port: 80\n    services:\n", 1)),
			want: map[string]want{"infra/root": {status: model.StatusInvalid, desc: "both service and services set"}},
		},
		{
			name: "orphan",
			docs: append(svcIn("team"), ir("team", "lonely", "", "/ -> app:80")),
			want: map[string]want{"team/lonely": {status: model.StatusOrphaned, desc: "not part of a delegation chain from a root"}},
		},
		{
			name: "cycle",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/ => a"), ir("a", "a", "", "/ -> app:80", "/x => b"), ir("a", "b", "", "/x => a")),
			want: map[string]want{
				"a/root": {status: model.StatusValid, root: "root"},
				"a/a":    {status: model.StatusValid, root: "root"},
				"a/b":    {status: model.StatusInvalid, desc: "delegation cycle: a/root -> a/a -> a/b -> a/a"},
			},
			routes: []string{"foo.com /"},
		},
		{
			name: "self delegation",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/ => root")),
			want: map[string]want{"a/root": {status: model.StatusInvalid, desc: "delegation cycle: a/root -> a/root"}},
		},
		{
			name: "invalid parent orphans its children",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/ -> app:80", "/p => parent"), ir("a", "parent", "", "/p -> missing:80", "/p/c => child"), ir("a", "child", "", "/p/c -> app:80")),
			want: map[string]want{
				"a/root":   {status: model.StatusValid, root: "root"},
				"a/parent": {status: model.StatusInvalid, desc: "service a/missing not found"},
				"a/child":  {status: model.StatusOrphaned, desc: "not part of a delegation chain from a root"},
			},
			routes: []string{"foo.com /"},
		},
		{
			name: "child with two parents, one invalid",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/p1 => p1", "/p2 => p2"), ir("a", "p1", "", "/p1 -> nope:80", "/p1 => child"), ir("a", "p2", "", "/p2 => child"), ir("a", "child", "", "/ -> app:80")),
			// child routes "/" lie outside both prefixes: make them fit.
			want: map[string]want{},
		},
		{
			name: "duplicate fqdn differing in case",
			docs: append(svcIn("a", "b"), ir("a", "one", "Foo.com", "/ -> app:80"), ir("b", "two", "foo.COM", "/ -> app:80"), ir("a", "three", "bar.com", "/ -> app:80")),
			want: map[string]want{
				"a/one":   {status: model.StatusInvalid, desc: `fqdn "foo.com" is also used by b/two`},
				"b/two":   {status: model.StatusInvalid, desc: `fqdn "foo.com" is also used by a/one`},
				"a/three": {status: model.StatusValid, root: "three"},
			},
			routes: []string{"bar.com /"},
		},
		{
			name: "delegate outside its prefix",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/ -> app:80", "/finance => fin"), ir("a", "fin", "", "/finance -> app:80", "/financial -> app:80")),
			want: map[string]want{
				"a/root": {status: model.StatusValid, root: "root"},
				"a/fin":  {status: model.StatusInvalid, desc: `"/financial" is outside the prefix "/finance"`},
			},
			routes: []string{"foo.com /"},
		},
		{
			name: "missing delegate makes the delegating object invalid",
			docs: append(svcIn("a"), ir("a", "root", "foo.com", "/ -> app:80", "/x => other/nope")),
			want: map[string]want{"a/root": {status: model.StatusInvalid, desc: "delegate other/nope not found"}},
		},
		{
			name: "roots outside root namespaces",
			opts: Options{RootNamespaces: []string{"infra"}},
			docs: append(svcIn("infra", "apps"), ir("infra", "ok", "ok.com", "/ -> app:80"), ir("apps", "rogue", "rogue.com", "/ -> app:80"), ir("apps", "vertex", "", "/ -> app:80")),
			want: map[string]want{
				"infra/ok":    {status: model.StatusValid, root: "ok"},
				"apps/rogue":  {status: model.StatusInvalid, desc: `not allowed in namespace "apps"`},
				"apps/vertex": {status: model.StatusOrphaned},
			},
			routes: []string{"ok.com /"},
		},
	}
	// Fix up the two-parent case so that the child's routes fit both prefixes.
	for i := range tests {
		if tests[i].name == "child with two parents, one invalid" {
			tests[i].docs = append(svcIn("a"),
				ir("a", "root", "foo.com", "/shared => p1", "/shared/ => p2"),
				ir("a", "p1", "", "/shared -> nope:80", "/shared/x => child"),
				ir("a", "p2", "", "/shared/x => child"),
				ir("a", "child", "", "/shared/x -> app:80"))
			tests[i].want = map[string]want{
				"a/root":  {status: model.StatusValid, root: "root"},
				"a/p1":    {status: model.StatusInvalid, desc: "service a/nope not found"},
				"a/p2":    {status: model.StatusValid, root: "root"},
				"a/child": {status: model.StatusValid, root: "root"},
			}
			tests[i].routes = []string{"foo.com /shared/x"}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, tt.opts, tt.docs...)
			for key, w := range tt.want {
				ns, name, _ := strings.Cut(key, "/")
				var got model.ObjectStatus
				for _, s := range snap.Objects {
					if s.Object.Kind == "IngressRoute" && s.Object.Namespace == ns && s.Object.Name == name {
						got = s
					}
				}
				if got.Status != w.status || !strings.Contains(got.Description, w.desc) {
					t.Errorf("%s: status %q %q, want %q containing %q", key, got.Status, got.Description, w.status, w.desc)
				}
				if w.root != "" && (got.Root == nil || got.Root.Name != w.root) {
					t.Errorf("%s: root %+v, want %s", key, got.Root, w.root)
				}
				if w.status != model.StatusValid && got.Root != nil {
					t.Errorf("%s: root set on a %s object", key, got.Status)
				}
			}
			for _, p := range snap.Problems {
				if strings.Contains(p.Message, "duplicate route") {
					t.Errorf("walked twice: %s", p)
				}
			}
			var served []string
			for _, r := range snap.Routes {
				served = append(served, r.Host+" "+r.Path)
			}
			if strings.Join(served, ";") != strings.Join(tt.routes, ";") {
				t.Errorf("routes %q, want %q\n%s", served, tt.routes, dumpProblems(snap))
			}
		})
	}
}

func TestIngressRouteWeights(t *testing.T) {
	route := func(weights ...string) string {
		s := "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: r\nspec:\n  virtualhost:\n    fqdn: foo.com\n  routes:\n  - match: /\n    services:\n"
		for i, w := range weights {
			s += "    - name: s" + string(rune('0'+i)) + "\n      port: 80\n"
			if w != "-" {
				s += "      weight: " + w + "\n"
			}
		}
		return s
	}
	svcs := []string{service("default", "s0", "http:80:80"), service("default", "s1", "http:80:80"), service("default", "s2", "http:80:80")}
	tests := []struct {
		name    string
		weights []string
		want    string // "s0=1,s1=1"
	}{
		{"all missing share evenly", []string{"-", "-", "-"}, "s0=1,s1=1,s2=1"},
		{"all set", []string{"70", "20", "10"}, "s0=70,s1=20,s2=10"},
		{"missing get none when others are set", []string{"50", "-", "50"}, "s0=50,s2=50"},
		{"zero gets no traffic", []string{"0", "100", "-"}, "s1=100"},
		{"all zero share evenly", []string{"0", "0", "0"}, "s0=1,s1=1,s2=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{}, append(svcs, route(tt.weights...))...)
			r := findRoute(snap, "foo.com", "/", model.PathPrefix)
			if r == nil {
				t.Fatalf("no route:\n%s", dumpProblems(snap))
			}
			var got []string
			for _, wb := range r.Cluster.Backends {
				got = append(got, wb.Backend.Service.Name+"="+itoa(int(wb.Weight)))
			}
			if strings.Join(got, ",") != tt.want {
				t.Fatalf("weights %s, want %s", strings.Join(got, ","), tt.want)
			}
		})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func TestIngressRouteTLS(t *testing.T) {
	crt, key := genCert(t, "foo.com")
	root := func(version string) string {
		s := "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: r\nspec:\n  virtualhost:\n    fqdn: foo.com\n    tls:\n      secretName: foo\n"
		if version != "" {
			s += "      minimumProtocolVersion: \"" + version + "\"\n"
		}
		return s + "  routes:\n  - match: /\n    services:\n    - {name: app, port: 80}\n  - match: /.well-known/acme-challenge\n    permitInsecure: true\n    services:\n    - {name: app, port: 80}\n"
	}
	tests := []struct {
		version string
		want    uint16
		valid   bool
	}{
		{"", tls.VersionTLS12, true},
		{"1.2", tls.VersionTLS12, true},
		{"1.3", tls.VersionTLS13, true},
		{"1.1", tls.VersionTLS11, true},
		{"1.0", 0, false},
	}
	for _, tt := range tests {
		t.Run("version "+tt.version, func(t *testing.T) {
			snap := buildDocs(t, Options{}, service("default", "app", "http:80:80"), tlsSecretYAML("foo", crt, key), root(tt.version))
			if !tt.valid {
				if !hasProblem(snap, model.SeverityError, "IngressRoute", "r", "spec.virtualhost.tls.minimumProtocolVersion", "unsupported") {
					t.Fatalf("want a version error:\n%s", dumpProblems(snap))
				}
				return
			}
			if len(snap.Certificates) != 1 || snap.Certificates[0].MinVersion != tt.want {
				t.Fatalf("certificates %+v\n%s", snap.Certificates, dumpProblems(snap))
			}
			if r := findRoute(snap, "foo.com", "/", model.PathPrefix); r == nil || !r.RedirectHTTPS {
				t.Fatalf("route / should redirect: %+v", r)
			}
			if r := findRoute(snap, "foo.com", "/.well-known/acme-challenge", model.PathPrefix); r == nil || r.RedirectHTTPS {
				t.Fatalf("permitInsecure route should not redirect: %+v", r)
			}
		})
	}
	t.Run("certificate not covering the fqdn", func(t *testing.T) {
		other, okey := genCert(t, "bar.com")
		snap := buildDocs(t, Options{}, service("default", "app", "http:80:80"), tlsSecretYAML("foo", other, okey), root(""))
		if !hasProblem(snap, model.SeverityError, "IngressRoute", "r", "spec.virtualhost.tls.secretName", `does not cover host "foo.com"`) {
			t.Fatalf("want a host mismatch:\n%s", dumpProblems(snap))
		}
		if len(snap.Routes) != 0 {
			t.Fatalf("invalid root still routes")
		}
	})
}

func TestIngressRoutePolicies(t *testing.T) {
	doc := `apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata:
  name: r
spec:
  virtualhost:
    fqdn: foo.com
    strategy: Random
    healthCheck:
      path: /healthz
  routes:
  - match: /a
    services:
    - name: app
      port: 80
  - match: /b
    strategy: WeightedLeastRequest
    services:
    - name: app
      port: 80
  - match: /c
    services:
    - name: other
      port: 80
      healthCheck:
        path: /ready
        host: probe
        intervalSeconds: 10
        timeoutSeconds: 1
        unhealthyThresholdCount: 2
        healthyThresholdCount: 4
`
	snap := buildDocs(t, Options{}, service("default", "app", "http:80:80"), service("default", "other", "http:80:80"), doc)
	app := snap.Backends["default/app:80"]
	if app == nil || app.Strategy != model.Random || app.HealthCheck == nil {
		t.Fatalf("app backend %+v", app)
	}
	want := model.HealthCheck{Path: "/healthz", Host: model.DefaultHealthCheckHost, Interval: model.DefaultHealthCheckInterval, Timeout: model.DefaultHealthCheckTimeout, UnhealthyThreshold: 3, HealthyThreshold: 5}
	if *app.HealthCheck != want {
		t.Fatalf("defaults %+v, want %+v", *app.HealthCheck, want)
	}
	// Route /b asks for another strategy on the same backend: first wins, warning.
	if !hasProblem(snap, model.SeverityWarning, "IngressRoute", "r", "spec.routes[1].services[0]", "already has strategy \"Random\"") {
		t.Fatalf("want a policy conflict warning:\n%s", dumpProblems(snap))
	}
	other := snap.Backends["default/other:80"]
	if other == nil || other.HealthCheck == nil || other.HealthCheck.Host != "probe" || other.HealthCheck.Interval.Seconds() != 10 || other.HealthCheck.UnhealthyThreshold != 2 || other.HealthCheck.HealthyThreshold != 4 {
		t.Fatalf("other backend %+v", other)
	}
	if findRoute(snap, "foo.com", "/a", model.PathPrefix).Cluster.Backends[0].Backend != findRoute(snap, "foo.com", "/b", model.PathPrefix).Cluster.Backends[0].Backend {
		t.Fatalf("routes /a and /b do not share the backend")
	}
}

var canaryConfigTime = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestIngressRouteCanary(t *testing.T) {
	base := func(canary string) string {
		return "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: r\nspec:\n  virtualhost:\n    fqdn: foo.com\n  routes:\n  - match: /\n    services:\n    - {name: app, port: 80}\n    canary:\n" + indent(canary, 6)
	}
	tests := []struct {
		name   string
		canary string
		field  string // error field, "" for valid
		check  func(t *testing.T, c *model.Canary)
	}{
		{name: "percentage with defaults", canary: "service: {name: beta, port: 80}\npercentage: 10", check: func(t *testing.T, c *model.Canary) {
			if c.Steps != DefaultCanarySteps || c.Hash != model.CanaryHashConsumer || c.ConsumerHeader != "X-Consumer-ID" || *c.Percentage != 10 || c.Backend.Key != "default/beta:80" {
				t.Fatalf("canary %+v", c)
			}
		}},
		{name: "timed rollout", canary: "service: {name: beta, port: 80}\nstart: 1700000000\nhash: ip\nsteps: 100\noverrideHeader: X-Canary\nupstreamFallback: true", check: func(t *testing.T, c *model.Canary) {
			if c.Percentage != nil || c.Start.Unix() != 1700000000 || c.Duration.Hours() != 1 || c.Steps != 100 || c.Hash != model.CanaryHashIP || c.OverrideHeader != "X-Canary" || !c.UpstreamFallback {
				t.Fatalf("canary %+v", c)
			}
		}},
		{name: "header hash", canary: "service: {name: beta, port: 80}\npercentage: 50\nhash: header\nhashHeader: X-User", check: func(t *testing.T, c *model.Canary) {
			if c.Hash != model.CanaryHashHeader || c.HashHeader != "X-User" {
				t.Fatalf("canary %+v", c)
			}
		}},
		{name: "percentage out of range", canary: "service: {name: beta, port: 80}\npercentage: 150", field: "spec.routes[0].canary.percentage"},
		{name: "zero steps", canary: "service: {name: beta, port: 80}\npercentage: 5\nsteps: 0", field: "spec.routes[0].canary.steps"},
		{name: "header hash without header", canary: "service: {name: beta, port: 80}\npercentage: 5\nhash: header", field: "spec.routes[0].canary.hashHeader"},
		{name: "unknown hash", canary: "service: {name: beta, port: 80}\npercentage: 5\nhash: cookie", field: "spec.routes[0].canary.hash"},
		{name: "neither percentage nor start starts at the configuration time", canary: "service: {name: beta, port: 80}", check: func(t *testing.T, c *model.Canary) {
			if c.Percentage != nil || !c.Start.Equal(canaryConfigTime) || c.Duration != DefaultCanaryDuration || c.Hash != model.CanaryHashConsumer {
				t.Fatalf("canary %+v", c)
			}
		}},
		{name: "percentage and start", canary: "service: {name: beta, port: 80}\npercentage: 5\nstart: 1", field: "spec.routes[0].canary"},
		{name: "zero duration", canary: "service: {name: beta, port: 80}\nstart: 1\nduration: 0", field: "spec.routes[0].canary.duration"},
		{name: "missing canary service", canary: "service: {name: gamma, port: 80}\npercentage: 5", field: "spec.routes[0].canary.service.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{ConfigTime: canaryConfigTime}, service("default", "app", "http:80:80"), service("default", "beta", "http:80:80"), base(tt.canary))
			if tt.field != "" {
				if !hasProblem(snap, model.SeverityError, "IngressRoute", "r", tt.field, "") {
					t.Fatalf("want an error on %s:\n%s", tt.field, dumpProblems(snap))
				}
				return
			}
			r := findRoute(snap, "foo.com", "/", model.PathPrefix)
			if r == nil || r.Cluster.Canary == nil {
				t.Fatalf("no canary:\n%s", dumpProblems(snap))
			}
			if snap.Backends[r.Cluster.Canary.Backend.Key] != r.Cluster.Canary.Backend {
				t.Fatalf("canary backend not in Snapshot.Backends")
			}
			tt.check(t, r.Cluster.Canary)
		})
	}
}

func TestIngressRouteIntrinsicErrors(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"no routes", "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: r}\nspec:\n  virtualhost: {fqdn: foo.com}\n  routes: []\n", "spec.routes"},
		{"relative match", ir("default", "r", "foo.com", "foo -> app:80"), "spec.routes[0].match"},
		{"wildcard fqdn", ir("default", "r", "\"*.foo.com\"", "/ -> app:80"), "spec.virtualhost.fqdn"},
		{"bad strategy", strings.Replace(ir("default", "r", "foo.com", "/ -> app:80"), "  - match: /\n", "  - match: /\n    strategy: Fastest\n", 1), "spec.routes[0].strategy"},
		{"services and delegate", strings.Replace(ir("default", "r", "foo.com", "/ -> app:80"), "  - match: /\n", "  - match: /\n    delegate: {name: x}\n", 1), "spec.routes[0]"},
		{"port out of range", ir("default", "r", "foo.com", "/ -> app:70000"), "spec.routes[0].services[0].port"},
		{"port missing on service", ir("default", "r", "foo.com", "/ -> app:81"), "spec.routes[0].services[0].port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{}, service("default", "app", "http:80:80"), tt.doc)
			if !hasProblem(snap, model.SeverityError, "IngressRoute", "r", tt.field, "") {
				t.Fatalf("want an error on %s:\n%s", tt.field, dumpProblems(snap))
			}
			if s := statusOf(snap, "IngressRoute", "r"); s.Status != model.StatusInvalid || len(snap.Routes) != 0 {
				t.Fatalf("status %+v routes %d", s, len(snap.Routes))
			}
		})
	}
}
