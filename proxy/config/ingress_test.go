package config

import (
	"crypto/tls"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/proxy/model"
)

var webSvc = service("default", "web", "http:80:8080", "admin:9000:9000")

func TestIngressPaths(t *testing.T) {
	const field = "spec.rules[0].http.paths[0]"
	tests := []struct {
		name, pathType, path string
		wantPath             string
		wantType             model.PathType
		wantErrField         string
		wantWarnField        string
	}{
		{name: "prefix", pathType: "Prefix", path: "/foo", wantPath: "/foo", wantType: model.PathPrefix},
		{name: "prefix trailing slash dropped", pathType: "Prefix", path: "/foo/", wantPath: "/foo", wantType: model.PathPrefix},
		{name: "prefix root kept", pathType: "Prefix", path: "/", wantPath: "/", wantType: model.PathPrefix},
		{name: "exact keeps trailing slash", pathType: "Exact", path: "/foo/", wantPath: "/foo/", wantType: model.PathExact},
		{name: "implementation specific is prefix", pathType: "ImplementationSpecific", path: "/a/b/", wantPath: "/a/b", wantType: model.PathPrefix},
		{name: "empty path is root", pathType: "Prefix", path: "-", wantPath: "/", wantType: model.PathPrefix},
		{name: "relative path", pathType: "Prefix", path: "foo", wantErrField: field + ".path"},
		{name: "double slash", pathType: "Exact", path: "//", wantErrField: field + ".path"},
		{name: "consecutive slashes inside", pathType: "Prefix", path: "/foo///bar", wantErrField: field + ".path"},
		{name: "space", pathType: "Prefix", path: "/a b", wantErrField: field + ".path"},
		{name: "unknown path type", pathType: "Regex", path: "/foo", wantErrField: field + ".pathType"},
		// Paths are matched in the form requests are normalized to.
		{name: "dot segment", pathType: "Prefix", path: "/a/../admin", wantErrField: field + ".path"},
		{name: "encoded dot segment", pathType: "Prefix", path: "/a/%2e%2e", wantErrField: field + ".path"},
		{name: "dot segment with parameters", pathType: "Exact", path: "/a/..;x", wantErrField: field + ".path"},
		{name: "encoded slash", pathType: "Prefix", path: "/a%2Fb", wantErrField: field + ".path"},
		{name: "backslash", pathType: "Prefix", path: `/a\b`, wantErrField: field + ".path"},
		{name: "escapes made canonical", pathType: "Prefix", path: "/%7euser/caf%c3%a9", wantPath: "/~user/caf%C3%A9", wantType: model.PathPrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{}, webSvc, ingress("default", "ing", "foo.com", tt.pathType+"|"+tt.path+"|web|80"))
			if tt.wantErrField != "" {
				if !hasProblem(snap, model.SeverityError, "Ingress", "ing", tt.wantErrField, "") {
					t.Fatalf("want an error on %s, got:\n%s", tt.wantErrField, dumpProblems(snap))
				}
				if len(snap.Routes) != 0 {
					t.Fatalf("broken Ingress still routes: %+v", snap.Routes)
				}
				if s := statusOf(snap, "Ingress", "ing"); s.Status != model.StatusInvalid {
					t.Fatalf("status %q, want invalid", s.Status)
				}
				return
			}
			if errs := snap.Errors(); len(errs) > 0 {
				t.Fatalf("unexpected errors:\n%s", dumpProblems(snap))
			}
			if findRoute(snap, "foo.com", tt.wantPath, tt.wantType) == nil {
				t.Fatalf("no route %s %s in %+v", tt.wantPath, tt.wantType, snap.Routes)
			}
		})
	}
}

func TestIngressMissingPathTypeIsPrefixWithWarning(t *testing.T) {
	doc := strings.Replace(ingress("default", "ing", "", "Prefix /foo/ web 80"), "      - pathType: Prefix\n        path", "      - path", 1)
	snap := buildDocs(t, Options{}, webSvc, doc)
	if !hasProblem(snap, model.SeverityWarning, "Ingress", "ing", "spec.rules[0].http.paths[0].pathType", "missing") {
		t.Fatalf("want a warning on pathType:\n%s", dumpProblems(snap))
	}
	if findRoute(snap, "", "/foo", model.PathPrefix) == nil {
		t.Fatalf("no prefix route: %+v", snap.Routes)
	}
}

func TestIngressHosts(t *testing.T) {
	tests := []struct {
		host, want string
		valid      bool
	}{
		{"foo.com", "foo.com", true},
		{"Foo.COM", "foo.com", true},
		{"*.foo.com", "*.foo.com", true},
		{"*.Foo.com", "*.foo.com", true},
		{"", "", true},
		{"*", "", false},
		{"*.*.foo.com", "", false},
		{"a.*.foo.com", "", false},
		{"*foo.com", "", false},
		{"foo*.com", "", false},
		{"foo..com", "", false},
		{"-foo.com", "", false},
		{"foo.com:80", "", false},
		{"foo_bar.com", "", false},
		{"1.2.3.4", "", false},
		{strings.Repeat("a", 64) + ".com", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			snap := buildDocs(t, Options{}, webSvc, ingress("default", "ing", tt.host, "Prefix /x web 80"))
			gotErr := hasProblem(snap, model.SeverityError, "Ingress", "ing", "spec.rules[0].host", "invalid host")
			if gotErr == tt.valid {
				t.Fatalf("valid=%v, problems:\n%s", tt.valid, dumpProblems(snap))
			}
			if tt.valid && findRoute(snap, tt.want, "/x", model.PathPrefix) == nil {
				t.Fatalf("no route for host %q: %+v", tt.want, snap.Routes)
			}
		})
	}
}

func TestIngressClassRules(t *testing.T) {
	ourDefault := "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: revgate\n  annotations:\n    ingressclass.kubernetes.io/is-default-class: \"true\"\nspec:\n  controller: revgate.io/ingress-controller\n"
	otherDefault := "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\n  annotations:\n    ingressclass.kubernetes.io/is-default-class: \"true\"\nspec:\n  controller: k8s.io/ingress-nginx\n"
	customOurs := "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: custom\nspec:\n  controller: revgate.io/ingress-controller\n"
	customOther := "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: custom\nspec:\n  controller: example.com/other\n"
	tests := []struct {
		name        string
		opts        Options
		annotation  string // "" for none
		field       string // "" for none
		classes     []string
		ours        bool
		wantWarning bool
	}{
		{name: "field names our class, no IngressClass loaded", field: "revgate", ours: true},
		{name: "field names another class", field: "nginx", ours: false},
		{name: "annotation names our class", annotation: "revgate", ours: true},
		{name: "annotation wins over field", annotation: "revgate", field: "nginx", ours: true, wantWarning: true},
		{name: "annotation wins over field the other way", annotation: "nginx", field: "revgate", ours: false, wantWarning: true},
		{name: "no class, our default class loaded", classes: []string{ourDefault}, ours: true},
		{name: "no class, no IngressClass loaded", ours: false},
		{name: "no class, default class is not ours", classes: []string{otherDefault}, ours: false},
		{name: "class with our controller under another name", field: "custom", classes: []string{customOurs}, ours: true},
		{name: "class of another controller", field: "custom", classes: []string{customOther}, ours: false},
		{name: "configured class name", opts: Options{IngressClass: "edge"}, field: "edge", ours: true},
		{name: "default name not ours when configured otherwise", opts: Options{IngressClass: "edge"}, field: "revgate", ours: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := ""
			if tt.field != "" {
				extra = "  ingressClassName: " + tt.field + "\n"
			}
			doc := ingressWith("default", "ing", extra, "foo.com", "Prefix / web 80")
			if tt.annotation != "" {
				doc = strings.Replace(doc, "  namespace: default\n", "  namespace: default\n  annotations:\n    kubernetes.io/ingress.class: "+tt.annotation+"\n", 1)
			}
			snap := buildDocs(t, tt.opts, append([]string{webSvc, doc}, tt.classes...)...)
			st := statusOf(snap, "Ingress", "ing")
			if tt.ours {
				if st.Status != model.StatusValid || findRoute(snap, "foo.com", "/", model.PathPrefix) == nil {
					t.Fatalf("want served, status %+v, problems:\n%s", st, dumpProblems(snap))
				}
			} else if st.Status != model.StatusIgnored || st.Description == "" || len(snap.Routes) != 0 {
				t.Fatalf("want ignored with a reason, got %+v routes %d", st, len(snap.Routes))
			}
			if got := hasProblem(snap, model.SeverityWarning, "Ingress", "ing", "spec.ingressClassName", "wins over"); got != tt.wantWarning {
				t.Fatalf("class warning %v, want %v:\n%s", got, tt.wantWarning, dumpProblems(snap))
			}
			// The cluster loop's filter applies the same rules.
			var ing networkingv1.Ingress
			var classes []*networkingv1.IngressClass
			if err := yaml.Unmarshal([]byte(doc), &ing); err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.classes {
				ic := &networkingv1.IngressClass{}
				if err := yaml.Unmarshal([]byte(c), ic); err != nil {
					t.Fatal(err)
				}
				classes = append(classes, ic)
			}
			f := NewClassFilter(tt.opts, classes)
			if got, why := f.IngressServed(&ing); got != tt.ours || (!got && why != st.Description) {
				t.Fatalf("ClassFilter.IngressServed = %v %q, translation: %+v", got, why, st)
			}
			for _, ic := range classes {
				if got, ignored := f.ClassServed(ic), statusOf(snap, "IngressClass", ic.Name).Status == model.StatusIgnored; got == ignored {
					t.Fatalf("ClassFilter.ClassServed(%s) = %v, translation ignored it: %v", ic.Name, got, ignored)
				}
			}
		})
	}
}

func TestIngressConflicts(t *testing.T) {
	withTime := func(doc, ts string) string {
		return strings.Replace(doc, "  namespace:", "  creationTimestamp: \""+ts+"\"\n  namespace:", 1)
	}
	a := ingress("default", "a", "foo.com", "Prefix /shared web 80", "Prefix /only-a web 80")
	b := ingress("default", "b", "foo.com", "Prefix /shared/ web admin", "Exact /shared web 80")
	tests := []struct {
		name         string
		a, b         string
		winner, lose string
	}{
		{name: "same age: namespace/name order", a: a, b: b, winner: "a", lose: "b"},
		{name: "older wins", a: withTime(a, "2024-01-02T00:00:00Z"), b: withTime(b, "2024-01-01T00:00:00Z"), winner: "b", lose: "a"},
		{name: "older wins regardless of file order", a: withTime(b, "2024-01-01T00:00:00Z"), b: withTime(a, "2024-01-02T00:00:00Z"), winner: "b", lose: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{}, webSvc, tt.a, tt.b)
			r := findRoute(snap, "foo.com", "/shared", model.PathPrefix)
			if r == nil || r.Source.Name != tt.winner {
				t.Fatalf("winner %+v, want %s", r, tt.winner)
			}
			if !hasProblem(snap, model.SeverityWarning, "Ingress", tt.lose, "spec.rules[0].http.paths[0]", "Ingress/default/"+tt.winner+", which wins") {
				t.Fatalf("no warning on the loser naming the winner:\n%s", dumpProblems(snap))
			}
			// Both stay valid for their other routes; Exact and Prefix do not conflict.
			if findRoute(snap, "foo.com", "/only-a", model.PathPrefix) == nil || findRoute(snap, "foo.com", "/shared", model.PathExact) == nil {
				t.Fatalf("other routes missing: %+v", snap.Routes)
			}
			for _, n := range []string{"a", "b"} {
				if s := statusOf(snap, "Ingress", n); s.Status != model.StatusValid || !s.InUse {
					t.Fatalf("%s: %+v", n, s)
				}
			}
		})
	}
}

func TestIngressDefaultBackends(t *testing.T) {
	def := func(name, ts, svc string) string {
		return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + name + "\n  creationTimestamp: \"" + ts + "\"\nspec:\n  ingressClassName: revgate\n  defaultBackend:\n    service:\n      name: " + svc + "\n      port:\n        number: 80\n"
	}
	snap := buildDocs(t, Options{}, webSvc, service("default", "other", "http:80:80"),
		def("b-new", "2024-02-01T00:00:00Z", "web"), def("a-old", "2024-01-01T00:00:00Z", "other"))
	var defs []model.Route
	for _, r := range snap.Routes {
		if r.Default {
			defs = append(defs, r)
		}
	}
	if len(defs) != 1 || defs[0].Source.Name != "a-old" || defs[0].Path != "/" || defs[0].Host != "" || defs[0].PathType != model.PathPrefix {
		t.Fatalf("default routes %+v", defs)
	}
	if !hasProblem(snap, model.SeverityWarning, "Ingress", "b-new", "spec.defaultBackend", "Ingress/default/a-old, which wins") {
		t.Fatalf("no warning on the loser:\n%s", dumpProblems(snap))
	}
}

func TestIngressBackends(t *testing.T) {
	extName := "apiVersion: v1\nkind: Service\nmetadata:\n  name: ext\nspec:\n  type: ExternalName\n  externalName: api.example.net\n  ports:\n  - port: 443\n    name: https\n"
	headless := "apiVersion: v1\nkind: Service\nmetadata:\n  name: headless\nspec:\n  clusterIP: None\n  ports:\n  - port: 80\n"
	tests := []struct {
		name     string
		docs     []string
		path     string // "type path service port"
		wantEPs  []string
		wantTLS  bool
		errField string
		errMsg   string
	}{
		{name: "port by number, ready endpoints only", docs: []string{webSvc, slice("default", "web-1", "web", "http", "8080", "10.1.0.1", "10.1.0.2!", "127.0.0.1?")}, path: "Prefix / web 80", wantEPs: []string{"10.1.0.1:8080", "127.0.0.1:8080"}},
		{name: "port by name", docs: []string{webSvc, slice("default", "web-1", "web", "admin", "9100", "10.1.0.1")}, path: "Prefix / web admin", wantEPs: []string{"10.1.0.1:9100"}},
		{name: "slice port matched by name", docs: []string{webSvc, slice("default", "web-1", "web", "admin", "9100", "10.1.0.1")}, path: "Prefix / web 80", wantEPs: []string{}},
		{name: "several slices merged", docs: []string{webSvc, slice("default", "web-1", "web", "http", "8080", "10.1.0.1"), slice("default", "web-2", "web", "http", "8080", "10.1.0.2")}, path: "Prefix / web http", wantEPs: []string{"10.1.0.1:8080", "10.1.0.2:8080"}},
		{name: "no slice: cluster IP", docs: []string{webSvc}, path: "Prefix / web 80", wantEPs: []string{"10.0.0.1:80"}},
		{name: "headless without slice: no endpoint", docs: []string{headless}, path: "Prefix / headless 80", wantEPs: []string{}},
		{name: "external name", docs: []string{extName}, path: "Prefix / ext 443", wantEPs: []string{"api.example.net:443"}, wantTLS: true},
		{name: "missing service", docs: []string{webSvc}, path: "Prefix / nope 80", errField: "spec.rules[0].http.paths[0].backend.service.name", errMsg: "service default/nope not found"},
		{name: "missing port number", docs: []string{webSvc}, path: "Prefix / web 81", errField: "spec.rules[0].http.paths[0].backend.service.port", errMsg: "no port 81"},
		{name: "missing port name", docs: []string{webSvc}, path: "Prefix / web grpc", errField: "spec.rules[0].http.paths[0].backend.service.port", errMsg: `no port named "grpc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{}, append(tt.docs, ingress("default", "ing", "", tt.path))...)
			if tt.errField != "" {
				if !hasProblem(snap, model.SeverityError, "Ingress", "ing", tt.errField, tt.errMsg) {
					t.Fatalf("want error %q on %s:\n%s", tt.errMsg, tt.errField, dumpProblems(snap))
				}
				if len(snap.Routes) != 0 {
					t.Fatalf("routes of a broken Ingress: %+v", snap.Routes)
				}
				return
			}
			if len(snap.Errors()) > 0 || len(snap.Routes) != 1 {
				t.Fatalf("routes %+v problems:\n%s", snap.Routes, dumpProblems(snap))
			}
			b := snap.Routes[0].Cluster.Backends[0].Backend
			if !slices.Equal(b.Endpoints, tt.wantEPs) || b.TLS != tt.wantTLS {
				t.Fatalf("endpoints %q tls %v, want %q %v", b.Endpoints, b.TLS, tt.wantEPs, tt.wantTLS)
			}
			if snap.Backends[b.Key] != b {
				t.Fatalf("backend %s not shared through Snapshot.Backends", b.Key)
			}
		})
	}
}

func TestIngressSharedBackend(t *testing.T) {
	snap := buildDocs(t, Options{}, webSvc, ingress("default", "a", "a.com", "Prefix / web 80"), ingress("default", "b", "b.com", "Prefix / web http"))
	ra, rb := findRoute(snap, "a.com", "/", model.PathPrefix), findRoute(snap, "b.com", "/", model.PathPrefix)
	if ra == nil || rb == nil || ra.Cluster.Backends[0].Backend != rb.Cluster.Backends[0].Backend || len(snap.Backends) != 1 {
		t.Fatalf("backend not shared: %+v %+v", ra, rb)
	}
}

func TestIngressResourceBackend(t *testing.T) {
	doc := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: ing\nspec:\n  ingressClassName: revgate\n  defaultBackend:\n    resource:\n      apiGroup: acme.io\n      kind: Bucket\n      name: b\n"
	snap := buildDocs(t, Options{}, doc)
	if !hasProblem(snap, model.SeverityError, "Ingress", "ing", "spec.defaultBackend.resource", "not supported") {
		t.Fatalf("want unsupported resource:\n%s", dumpProblems(snap))
	}
}

func TestIngressTLS(t *testing.T) {
	crt, key := genCert(t, "foo.com", "*.wild.com")
	tlsIngress := func(secret string, hosts ...string) string {
		s := ingress("default", "ing", "foo.com", "Prefix / web 80") + "  tls:\n  - secretName: " + secret + "\n"
		if len(hosts) > 0 {
			s += "    hosts: [" + strings.Join(hosts, ",") + "]\n"
		}
		return s
	}
	opaque := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: opaque\ntype: Opaque\ndata:\n  tls.crt: " + "YQ==" + "\n"
	tests := []struct {
		name       string
		docs       []string
		wantHosts  []string
		errKind    string
		errName    string
		errField   string
		errMsg     string
		ingressSts model.Status
	}{
		{name: "hosts default to rule hosts", docs: []string{tlsSecretYAML("good", crt, key), tlsIngress("good")}, wantHosts: []string{"foo.com"}},
		{name: "base64 data", docs: []string{"apiVersion: v1\nkind: Secret\nmetadata:\n  name: good\ntype: kubernetes.io/tls\ndata:\n  tls.crt: " + base64.StdEncoding.EncodeToString([]byte(crt)) + "\n  tls.key: " + base64.StdEncoding.EncodeToString([]byte(key)) + "\n", tlsIngress("good", "FOO.com")}, wantHosts: []string{"foo.com"}},
		{name: "wildcard host covered by wildcard name", docs: []string{tlsSecretYAML("good", crt, key), tlsIngress("good", `"*.wild.com"`)}, wantHosts: []string{"*.wild.com"}},
		{name: "missing secret", docs: []string{tlsIngress("nope")}, errKind: "Ingress", errName: "ing", errField: "spec.tls[0].secretName", errMsg: "secret default/nope not found", ingressSts: model.StatusInvalid},
		{name: "wrong type", docs: []string{opaque, tlsIngress("opaque")}, errKind: "Ingress", errName: "ing", errField: "spec.tls[0].secretName", errMsg: `type "Opaque"`, ingressSts: model.StatusInvalid},
		{name: "mismatched host", docs: []string{tlsSecretYAML("good", crt, key), tlsIngress("good", "bar.com")}, errKind: "Ingress", errName: "ing", errField: "spec.tls[0].secretName", errMsg: `secret default/good does not cover host "bar.com"`, ingressSts: model.StatusInvalid},
		{name: "unreadable key pair", docs: []string{tlsSecretYAML("bad", crt, "garbage"), tlsIngress("bad")}, errKind: "Secret", errName: "bad", errField: "data[tls.crt]", errMsg: "invalid key pair", ingressSts: model.StatusExcluded},
		{name: "missing key", docs: []string{"apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: x\n", tlsIngress("bad")}, errKind: "Secret", errName: "bad", errField: "data[tls.key]", errMsg: "missing private key", ingressSts: model.StatusExcluded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := buildDocs(t, Options{}, append([]string{webSvc}, tt.docs...)...)
			if tt.errKind != "" {
				if !hasProblem(snap, model.SeverityError, tt.errKind, tt.errName, tt.errField, tt.errMsg) {
					t.Fatalf("want %q on %s %s:\n%s", tt.errMsg, tt.errName, tt.errField, dumpProblems(snap))
				}
				if s := statusOf(snap, "Ingress", "ing"); s.Status != tt.ingressSts || len(snap.Routes) != 0 || len(snap.Certificates) != 0 {
					t.Fatalf("ingress %+v routes %d certs %d", s, len(snap.Routes), len(snap.Certificates))
				}
				return
			}
			if len(snap.Errors()) > 0 || len(snap.Certificates) != 1 {
				t.Fatalf("certs %+v:\n%s", snap.Certificates, dumpProblems(snap))
			}
			c := snap.Certificates[0]
			if !slices.Equal(c.Hosts, tt.wantHosts) || c.MinVersion != tls.VersionTLS12 || c.Certificate == nil || c.Certificate.Leaf == nil || c.Secret.Name != "good" {
				t.Fatalf("certificate %+v", c)
			}
		})
	}
}

func TestCertificateExpiryWarning(t *testing.T) {
	crt, key := genCert(t, "foo.com")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": webSvc + "---\n" + tlsSecretYAML("s", crt, key) + "---\n" + ingress("default", "ing", "foo.com", "Prefix / web 80") + "  tls:\n  - secretName: s\n"})
	st, probs, err := osFS.load([]string{dir}, "default")
	if err != nil || len(probs) != 0 {
		t.Fatal(err, probs)
	}
	for _, tt := range []struct {
		name string
		at   time.Time
		want string
	}{
		{"valid", time.Now(), ""},
		{"expired", time.Now().Add(48 * time.Hour), "certificate expired at"},
		{"not yet valid", time.Now().Add(-48 * time.Hour), "certificate not valid before"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &builder{opts: Options{Dirs: []string{dir}, IngressClass: "revgate", Namespace: "default", Fallback: model.FallbackExclude}, clock: clocktesting.NewFakePassiveClock(tt.at)}
			snap := b.build(st, nil)
			if len(snap.Certificates) != 1 {
				t.Fatalf("certificate not served:\n%s", dumpProblems(snap))
			}
			got := hasProblem(snap, model.SeverityWarning, "Secret", "s", "data[tls.crt]", tt.want)
			if tt.want == "" {
				got = len(snap.Problems) == 0
			}
			if !got {
				t.Fatalf("want %q:\n%s", tt.want, dumpProblems(snap))
			}
		})
	}
}

func TestRevisionFolderSecrets(t *testing.T) {
	crt, key := genCert(t, "foo.com")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"revgate-pod.yaml":        "this is a pod manifest, not configuration: [",
		"configmaps/gw/routes":    webSvc + "---\n" + ingress("default", "ing", "foo.com", "Prefix / web 80") + "  tls:\n  - secretName: foo-tls\n",
		"configmaps/gw/.hidden":   "not: [valid",
		"secrets/foo-tls/tls.crt": crt,
		"secrets/foo-tls/tls.key": key,
	})
	snap, err := Build(Options{Dirs: []string{dir}, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Problems) != 0 || len(snap.Certificates) != 1 || len(snap.Routes) != 1 {
		t.Fatalf("certs %d routes %d problems:\n%s", len(snap.Certificates), len(snap.Routes), dumpProblems(snap))
	}
	if s := statusOf(snap, "Secret", "foo-tls"); s.Status != model.StatusValid || !s.InUse {
		t.Fatalf("secret status %+v", s)
	}
}

// Secrets of any namespace come from object files under secrets/_objects/,
// beside the secrets/<name>/ folders of Options.Namespace.
func TestRevisionFolderSecretObjects(t *testing.T) {
	crt, key := genCert(t, "foo.com")
	teamSecret := strings.Replace(tlsSecretYAML("team-tls", crt, key), "  name: team-tls\n", "  name: team-tls\n  namespace: team\n", 1)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"configmaps/services/team.web.yaml":   service("team", "web", "http:80:8080"),
		"configmaps/ingresses/team.ing.yaml":  ingress("team", "ing", "foo.com", "Prefix / web 80") + "  tls:\n  - secretName: team-tls\n",
		"secrets/_objects/team.team-tls.yaml": teamSecret,
		"secrets/_objects/.hidden":            "not: [valid",
	})
	snap, err := Build(Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Problems) != 0 || len(snap.Certificates) != 1 || len(snap.Routes) != 1 {
		t.Fatalf("certs %d routes %d problems:\n%s", len(snap.Certificates), len(snap.Routes), dumpProblems(snap))
	}
	s := statusOf(snap, "Secret", "team-tls")
	if s.Object.Namespace != "team" || s.Status != model.StatusValid || !s.InUse {
		t.Fatalf("secret status %+v", s)
	}
}
