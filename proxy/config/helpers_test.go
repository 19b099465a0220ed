package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/revgate/revgate/internal/testcert"
	"github.com/revgate/revgate/proxy/model"
)

// writeFiles writes name → content under dir, creating folders.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// buildDocs builds a snapshot from YAML documents written to one file of a
// plain folder.
func buildDocs(t testing.TB, opts Options, docs ...string) *model.Snapshot {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"config.yaml": strings.Join(docs, "\n---\n")})
	opts.Dirs = append([]string{dir}, opts.Dirs...)
	snap, err := Build(opts)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return snap
}

// genCert returns a self-signed certificate and key in PEM for hosts.
func genCert(t testing.TB, hosts ...string) (string, string) {
	c, k := testcert.MustPEM(t, hosts...)
	return string(c), string(k)
}

// tlsSecretYAML renders a kubernetes.io/tls Secret with stringData.
func tlsSecretYAML(name, crt, key string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n" + indent(crt, 4) + "  tls.key: |\n" + indent(key, 4)
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(pad + l + "\n")
	}
	return b.String()
}

// service renders a Service with named ports "name:port:targetPort".
func service(ns, name string, ports ...string) string {
	s := "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n  clusterIP: 10.0.0.1\n  ports:\n"
	for _, p := range ports {
		f := strings.Split(p, ":")
		s += "  - name: \"" + f[0] + "\"\n    port: " + f[1] + "\n    targetPort: " + f[2] + "\n"
	}
	return s
}

// slice renders an EndpointSlice of a Service with one port and addresses;
// an address suffixed with "!" is not ready, with "?" has no condition.
func slice(ns, name, svc, portName, port string, addrs ...string) string {
	s := "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n  labels:\n    kubernetes.io/service-name: " + svc + "\naddressType: IPv4\nports:\n- name: \"" + portName + "\"\n  port: " + port + "\nendpoints:\n"
	for _, a := range addrs {
		switch {
		case strings.HasSuffix(a, "!"):
			s += "- addresses: [\"" + strings.TrimSuffix(a, "!") + "\"]\n  conditions:\n    ready: false\n"
		case strings.HasSuffix(a, "?"):
			s += "- addresses: [\"" + strings.TrimSuffix(a, "?") + "\"]\n"
		default:
			s += "- addresses: [\"" + a + "\"]\n  conditions:\n    ready: true\n"
		}
	}
	return s
}

// ingress renders an Ingress of class revgate with one rule; paths are
// "pathType path service port" (or '|'-separated when the path has a space;
// "-" for an empty path) where port is a number or a name.
func ingress(ns, name, host string, paths ...string) string {
	return ingressWith(ns, name, "  ingressClassName: revgate\n", host, paths...)
}

func ingressWith(ns, name, specExtra, host string, paths ...string) string {
	s := "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n" + specExtra + "  rules:\n  - host: \"" + host + "\"\n    http:\n      paths:\n"
	for _, p := range paths {
		f := strings.Fields(p)
		if strings.Contains(p, "|") {
			f = strings.Split(p, "|")
		}
		if f[1] == "-" {
			f[1] = ""
		}
		port := "number: " + f[3]
		if f[3][0] < '0' || f[3][0] > '9' {
			port = "name: " + f[3]
		}
		s += "      - pathType: " + f[0] + "\n        path: \"" + f[1] + "\"\n        backend:\n          service:\n            name: " + f[2] + "\n            port:\n              " + port + "\n"
	}
	return s
}

func problemsOf(snap *model.Snapshot, kind, name string) []model.Problem {
	var out []model.Problem
	for _, p := range snap.Problems {
		if p.Object.Kind == kind && p.Object.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// hasProblem reports whether a problem of sev on kind/name has field and a
// message containing msg.
func hasProblem(snap *model.Snapshot, sev model.Severity, kind, name, field, msg string) bool {
	for _, p := range problemsOf(snap, kind, name) {
		if p.Severity == sev && p.Field == field && strings.Contains(p.Message, msg) {
			return true
		}
	}
	return false
}

func statusOf(snap *model.Snapshot, kind, name string) model.ObjectStatus {
	for _, s := range snap.Objects {
		if s.Object.Kind == kind && s.Object.Name == name {
			return s
		}
	}
	return model.ObjectStatus{}
}

func findRoute(snap *model.Snapshot, host, path string, pt model.PathType) *model.Route {
	for i, r := range snap.Routes {
		if r.Host == host && r.Path == path && r.PathType == pt && !r.Default {
			return &snap.Routes[i]
		}
	}
	return nil
}

func dumpProblems(snap *model.Snapshot) string {
	var b strings.Builder
	for _, p := range snap.Problems {
		b.WriteString(string(p.Severity) + " " + p.String() + "\n")
	}
	return b.String()
}
