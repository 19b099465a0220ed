package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

func TestLoadDocuments(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		wantObjs  []string // "Kind/ns/name"
		wantProbs []string // "severity|file|object|field|message substring"
	}{
		{
			name:     "multi-document YAML with empty documents",
			files:    map[string]string{"a.yaml": "---\n" + webSvc + "---\n---\n" + service("other", "b", "http:80:80")},
			wantObjs: []string{"Service/default/web", "Service/other/b"},
		},
		{
			name:     "JSON object and v1 List",
			files:    map[string]string{"a.json": `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"ports":[{"port":80}]}}]}`, "b.json": `{"apiVersion":"v1","kind":"Service","metadata":{"name":"y","namespace":"n"},"spec":{"ports":[{"port":80}]}}`},
			wantObjs: []string{"Service/default/x", "Service/n/y"},
		},
		{
			name:      "unknown field is a warning naming the field",
			files:     map[string]string{"a.yaml": strings.Replace(webSvc, "spec:\n", "spec:\n  colour: blue\n", 1)},
			wantObjs:  []string{"Service/default/web"},
			wantProbs: []string{"warning|a.yaml|Service/default/web|spec.colour|unknown field"},
		},
		{
			name:      "unknown kind is ignored with a warning",
			files:     map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: x\n"},
			wantObjs:  []string{"ConfigMap/x/cm"},
			wantProbs: []string{"warning|a.yaml|ConfigMap/x/cm||unsupported kind"},
		},
		{
			name:      "unparsable document names the file and index, others load",
			files:     map[string]string{"a.yaml": webSvc + "---\nkind: [oops\n", "b.yaml": service("default", "b", "http:80:80")},
			wantObjs:  []string{"Service/default/b", "Service/default/web"},
			wantProbs: []string{"error|a.yaml|||document 1"},
		},
		{
			name:      "wrong type of a field",
			files:     map[string]string{"a.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports: 80\n"},
			wantProbs: []string{"error|a.yaml|||document 0: v1 Service"},
		},
		{
			name:      "no name",
			files:     map[string]string{"a.yaml": "apiVersion: v1\nkind: Service\nmetadata: {}\n"},
			wantProbs: []string{"error|a.yaml|||without metadata.name"},
		},
		{
			name:      "duplicate object",
			files:     map[string]string{"a.yaml": webSvc, "b.yaml": webSvc},
			wantObjs:  []string{"Service/default/web", "Service/default/web"},
			wantProbs: []string{"warning|b.yaml|Service/default/web||duplicate object"},
		},
		{
			name:     "other extensions, dotfiles and sub-folders are not read",
			files:    map[string]string{"README.md": "# no", ".hidden.yaml": "kind: [", "sub/x.yaml": webSvc, "c.YML": webSvc},
			wantObjs: []string{"Service/default/web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			st, probs, err := osFS.load([]string{dir}, "default")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range st.objects {
				got = append(got, o.ref.String())
			}
			sortStrings(got)
			if strings.Join(got, ",") != strings.Join(tt.wantObjs, ",") {
				t.Errorf("objects %q, want %q", got, tt.wantObjs)
			}
			if len(probs) != len(tt.wantProbs) {
				t.Fatalf("problems %+v, want %q", probs, tt.wantProbs)
			}
			for i, w := range tt.wantProbs {
				f := strings.Split(w, "|")
				p := probs[i]
				obj := ""
				if p.Object.Kind != "" {
					obj = p.Object.String()
				}
				if string(p.Severity) != f[0] || filepath.Base(p.File) != f[1] || obj != f[2] || p.Field != f[3] || !strings.Contains(p.Message, f[4]) {
					t.Errorf("problem %d: %+v, want %s", i, p, w)
				}
			}
		})
	}
}

func TestDuplicateObjectDoesNotShadowTheFirst(t *testing.T) {
	crt, key := genCert(t, "foo.com")
	dir := t.TempDir()
	ing := ingress("default", "ing", "foo.com", "Prefix / web 80") + "  tls:\n  - secretName: s\n"
	writeFiles(t, dir, map[string]string{
		"a.yaml": webSvc + "---\n" + tlsSecretYAML("s", crt, key) + "---\n" + ing,
		"b.yaml": webSvc + "---\n" + tlsSecretYAML("s", crt, key),
	})
	snap, err := Build(Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Errors()) != 0 || len(snap.Routes) != 1 || len(snap.Certificates) != 1 {
		t.Fatalf("routes %d certs %d:\n%s", len(snap.Routes), len(snap.Certificates), dumpProblems(snap))
	}
	var statuses []string
	for _, s := range snap.Objects {
		if s.Object.Kind == "Service" || s.Object.Kind == "Secret" {
			statuses = append(statuses, filepath.Base(s.File)+":"+s.Object.Kind+":"+string(s.Status))
		}
	}
	sortStrings(statuses)
	if got := strings.Join(statuses, ","); got != "a.yaml:Secret:valid,a.yaml:Service:valid,b.yaml:Secret:ignored,b.yaml:Service:ignored" {
		t.Fatalf("statuses %s", got)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestBuildFailsOnlyWhenNothingCanBeRead(t *testing.T) {
	if _, err := Build(Options{Dirs: []string{filepath.Join(t.TempDir(), "missing")}}); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing folder: err %v", err)
	}
	file := filepath.Join(t.TempDir(), "f.yaml")
	writeFiles(t, filepath.Dir(file), map[string]string{"f.yaml": webSvc})
	if _, err := Build(Options{Dirs: []string{file}}); err == nil {
		t.Fatalf("a file as folder: no error")
	}
	// An unreadable file is a problem, not a failure.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": webSvc, "b.yaml": webSvc})
	fsys := osFS
	fsys.readFile = func(p string) ([]byte, error) {
		if filepath.Base(p) == "b.yaml" {
			return nil, fs.ErrPermission
		}
		return os.ReadFile(p)
	}
	st, probs, err := fsys.load([]string{dir}, "default")
	if err != nil || len(st.objects) != 1 || len(probs) != 1 || filepath.Base(probs[0].File) != "b.yaml" || probs[0].Severity != model.SeverityError {
		t.Fatalf("err %v objects %d problems %+v", err, len(st.objects), probs)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Dirs: []string{"a"}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Fallback != model.FallbackExclude || o.IngressClass != "revgate" || o.Namespace != "default" {
		t.Fatalf("defaults not filled in: %+v", o)
	}
	if err := (&Options{Dirs: []string{"a"}, Fallback: "sometimes"}).Validate(); err == nil {
		t.Fatalf("invalid fallback mode accepted")
	}
	if err := (&Options{}).Validate(); err == nil {
		t.Fatalf("no folder accepted")
	}
}

func TestExamplesAreValid(t *testing.T) {
	problems, err := Validate(Options{Dirs: []string{"../../examples"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("examples have problems: %+v", problems)
	}
	snap, err := Build(Options{Dirs: []string{"../../examples", "../../examples-broken"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Fallback.BrokenObjects) != 1 || snap.Fallback.BrokenObjects[0].Name != "team-b" || len(snap.Fallback.ExcludedObjects) != 1 {
		t.Fatalf("broken overlay: %+v", snap.Fallback)
	}
	if len(snap.Routes) < 6 {
		t.Fatalf("the rest is not served: %d routes", len(snap.Routes))
	}
}

func TestLastKnownGoodLink(t *testing.T) {
	res := t.TempDir()
	good := map[string]string{"revgate-pod.yaml": "kind: Pod", "configmaps/gw/cfg.yaml": webSvc + "---\n" + ingress("default", "ing", "foo.com", "Prefix / web 80")}
	writeFiles(t, filepath.Join(res, "revgate-pod-1"), good)
	writeFiles(t, filepath.Join(res, "revgate-pod-2"), map[string]string{"revgate-pod.yaml": "kind: Pod", "configmaps/gw/cfg.yaml": webSvc + "---\n" + ingress("default", "ing", "foo.com", "Prefix / nope 80")})
	if err := os.Symlink("revgate-pod-1/revgate-pod.yaml", filepath.Join(res, "revgate-last-known-good")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"through the link", Options{Dirs: []string{filepath.Join(res, "revgate-pod-2")}, Fallback: model.FallbackBackfill}},
		{"explicit folder", Options{Dirs: []string{filepath.Join(res, "revgate-pod-2")}, Fallback: model.FallbackBackfill, LastKnownGoodDir: filepath.Join(res, "revgate-pod-1")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := Build(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			r := findRoute(snap, "foo.com", "/", model.PathPrefix)
			if r == nil || !r.Backfilled || statusOf(snap, "Ingress", "ing").Status != model.StatusBackfilled {
				t.Fatalf("route %+v objects %+v\n%s", r, snap.Objects, dumpProblems(snap))
			}
		})
	}
}

// FuzzLoad feeds arbitrary bytes to the loader as one file: it must never
// panic, and every file-level problem names the file.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(webSvc))
	f.Add([]byte(ingress("default", "ing", "foo.com", "Prefix / web 80")))
	f.Add([]byte(ir("default", "r", "foo.com", "/ -> web:80", "/x => y")))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"type":"kubernetes.io/tls","data":{"tls.crt":"YQ=="}}]}`))
	f.Add([]byte("---\n---\nkind: [\n"))
	f.Add([]byte(slice("default", "s", "web", "http", "80", "127.0.0.1", "::1!")))
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz/input.yaml"
		st := newStore()
		var probs []model.Problem
		decodeFile(st, file, data, "default", &probs)
		for _, p := range probs {
			if p.File != file {
				t.Fatalf("problem without the file: %+v", p)
			}
		}
		// Translation of whatever loaded must not panic either.
		b := &builder{opts: Options{Dirs: []string{"fuzz"}, IngressClass: "revgate", Namespace: "default", Fallback: model.FallbackExclude}}
		snap := b.build(st, probs)
		for _, p := range snap.Problems {
			if p.File == "" && p.Severity == model.SeverityError {
				t.Fatalf("error without a file: %+v", p)
			}
		}
	})
}
