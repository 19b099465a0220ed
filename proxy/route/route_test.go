package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

func prefix(host, path string) model.Route {
	return model.Route{Host: host, Path: path, PathType: model.PathPrefix, Cluster: &model.Cluster{Name: "P " + host + path}}
}

func exact(host, path string) model.Route {
	return model.Route{Host: host, Path: path, PathType: model.PathExact, Cluster: &model.Cluster{Name: "E " + host + path}}
}

func dflt() model.Route {
	return model.Route{Default: true, Path: "/", PathType: model.PathPrefix, Cluster: &model.Cluster{Name: "default"}}
}

func name(e *Entry) string {
	if e == nil {
		return "<none>"
	}
	return e.Route.Cluster.Name
}

// TestKEPMatchingTable covers every row of the Ingress v1 KEP's path
// matching table. want is the matching cluster name, "<none>" for no match
// (the default backend, absent here, would be used).
func TestKEPMatchingTable(t *testing.T) {
	cases := []struct {
		name   string
		routes []model.Route
		paths  []string
		want   string
	}{
		{"prefix / matches all", []model.Route{prefix("", "/")}, []string{"/", "/a", "/a/b/", "/foo/bar"}, "P /"},
		{"exact /foo matches /foo", []model.Route{exact("", "/foo")}, []string{"/foo"}, "E /foo"},
		{"exact /foo not /bar", []model.Route{exact("", "/foo")}, []string{"/bar"}, "<none>"},
		{"exact /foo not /foo/", []model.Route{exact("", "/foo")}, []string{"/foo/"}, "<none>"},
		{"exact /foo/ not /foo", []model.Route{exact("", "/foo/")}, []string{"/foo"}, "<none>"},
		{"prefix /foo matches /foo and /foo/", []model.Route{prefix("", "/foo")}, []string{"/foo", "/foo/"}, "P /foo"},
		{"prefix /foo/ matches /foo and /foo/", []model.Route{prefix("", "/foo/")}, []string{"/foo", "/foo/"}, "P /foo/"},
		{"prefix /aaa/bb not /aaa/bbb", []model.Route{prefix("", "/aaa/bb")}, []string{"/aaa/bbb"}, "<none>"},
		{"prefix /aaa/bbb matches /aaa/bbb", []model.Route{prefix("", "/aaa/bbb")}, []string{"/aaa/bbb"}, "P /aaa/bbb"},
		{"prefix /aaa/bbb/ ignores trailing slash", []model.Route{prefix("", "/aaa/bbb/")}, []string{"/aaa/bbb"}, "P /aaa/bbb/"},
		{"prefix /aaa/bbb matches trailing slash", []model.Route{prefix("", "/aaa/bbb")}, []string{"/aaa/bbb/"}, "P /aaa/bbb"},
		{"prefix /aaa/bbb matches subpath", []model.Route{prefix("", "/aaa/bbb")}, []string{"/aaa/bbb/ccc"}, "P /aaa/bbb"},
		{"prefix /aaa/bbb not string prefix", []model.Route{prefix("", "/aaa/bbb")}, []string{"/aaa/bbbxyz"}, "<none>"},
		{"prefix /, /aaa: /aaa/ccc matches /aaa", []model.Route{prefix("", "/"), prefix("", "/aaa")}, []string{"/aaa/ccc"}, "P /aaa"},
		{"prefix /, /aaa, /aaa/bbb: /aaa/bbb matches /aaa/bbb", []model.Route{prefix("", "/"), prefix("", "/aaa"), prefix("", "/aaa/bbb")}, []string{"/aaa/bbb"}, "P /aaa/bbb"},
		{"prefix /, /aaa, /aaa/bbb: /ccc matches /", []model.Route{prefix("", "/"), prefix("", "/aaa"), prefix("", "/aaa/bbb")}, []string{"/ccc"}, "P /"},
		{"prefix /aaa not /ccc", []model.Route{prefix("", "/aaa")}, []string{"/ccc"}, "<none>"},
		{"mixed /foo prefers exact", []model.Route{prefix("", "/foo"), exact("", "/foo")}, []string{"/foo"}, "E /foo"},
		{"mixed /foo prefix still serves /foo/", []model.Route{prefix("", "/foo"), exact("", "/foo")}, []string{"/foo/", "/foo/x"}, "P /foo"},
		{"longest prefix wins regardless of order", []model.Route{prefix("", "/a/b/c"), prefix("", "/a"), prefix("", "/a/b")}, []string{"/a/b/x"}, "P /a/b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab := New(tc.routes, nil)
			for _, p := range tc.paths {
				if got := name(tab.Lookup("example.com", p)); got != tc.want {
					t.Errorf("Lookup(%q) = %s, want %s", p, got, tc.want)
				}
			}
		})
	}
}

func TestHostRules(t *testing.T) {
	routes := []model.Route{
		prefix("foo.com", "/"),
		prefix("*.foo.com", "/"),
		prefix("", "/"),
		prefix("only.com", "/api"),
		prefix("*.wild.com", "/api"),
		dflt(),
	}
	tab := New(routes, nil)
	cases := []struct {
		host, path, want string
	}{
		{"foo.com", "/x", "P foo.com/"},
		{"FOO.com:8080", "/x", "P foo.com/"},
		{"foo.com.", "/x", "P foo.com/"},
		{"bar.foo.com", "/x", "P *.foo.com/"},
		{"Bar.Foo.Com", "/x", "P *.foo.com/"},
		{"a.b.foo.com", "/x", "P /"},
		{"xfoo.com", "/x", "P /"},
		{"other.org", "/", "P /"},
		{"", "/", "P /"},
		{"127.0.0.1:8080", "/", "P /"},
		{"[::1]:8080", "/", "P /"},
		// No fall-through: the exact tier has routes, no path matches there,
		// so the default backend answers rather than the any-host route.
		{"only.com", "/api/v1", "P only.com/api"},
		{"only.com", "/web", "default"},
		{"x.wild.com", "/web", "default"},
		{"x.wild.com", "/api", "P *.wild.com/api"},
	}
	for _, tc := range cases {
		t.Run(tc.host+tc.path, func(t *testing.T) {
			if got := name(tab.Lookup(tc.host, tc.path)); got != tc.want {
				t.Errorf("Lookup(%q, %q) = %s, want %s", tc.host, tc.path, got, tc.want)
			}
		})
	}
}

func TestNoRouteNoDefaultIs404(t *testing.T) {
	tab := New([]model.Route{prefix("a.com", "/")}, nil)
	if e := tab.Lookup("b.com", "/"); e != nil {
		t.Fatalf("got %s, want no route", name(e))
	}
	tab = New(nil, nil)
	if e := tab.Lookup("b.com", "/"); e != nil {
		t.Fatalf("empty table matched %s", name(e))
	}
}

func TestAttachValue(t *testing.T) {
	tab := New([]model.Route{prefix("", "/a"), exact("", "/b")}, func(r *model.Route) any { return r.Path + "!" })
	if v := tab.Lookup("x", "/a/z").Value; v != "/a!" {
		t.Fatalf("value %v", v)
	}
	if n := len(tab.Entries()); n != 2 {
		t.Fatalf("entries %d", n)
	}
}

// referenceMatch is the specification written plainly: scan every route of
// the chosen host tier; Exact equal wins; else the longest element-wise prefix.
func referenceMatch(routes []model.Route, path string) string {
	if path == "" {
		path = "/"
	}
	best, bestLen := "<none>", -1
	for _, r := range routes {
		if r.PathType == model.PathExact {
			if r.Path == path {
				return name(&Entry{Route: &r})
			}
			continue
		}
		p := trimSlash(r.Path)
		ok := p == "/" || path == p || strings.HasPrefix(path, p+"/")
		if ok && len(p) > bestLen {
			best, bestLen = name(&Entry{Route: &r}), len(p)
		}
	}
	return best
}

// FuzzPathMatch compares Lookup with referenceMatch on routes and a request
// path derived from the fuzz input.
func FuzzPathMatch(f *testing.F) {
	f.Add("/a/b,/a,/c/", "/a/b/c", uint8(3))
	f.Add("/,/foo", "/foo/", uint8(1))
	f.Add("/aaa/bb", "/aaa/bbb", uint8(0))
	f.Add("/x//y,/x", "/x//y/z", uint8(2))
	f.Fuzz(func(t *testing.T, routeList, path string, exactMask uint8) {
		var routes []model.Route
		seen := map[string]bool{}
		for i, p := range strings.Split(routeList, ",") {
			if !strings.HasPrefix(p, "/") {
				continue
			}
			kind := model.PathPrefix
			if exactMask&(1<<(i%8)) != 0 {
				kind = model.PathExact
			}
			key := string(kind) + " " + p
			if kind == model.PathPrefix {
				key = string(kind) + " " + trimSlash(p)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			routes = append(routes, model.Route{Path: p, PathType: kind, Cluster: &model.Cluster{Name: key}})
		}
		tab := New(routes, nil)
		got := name(tab.Lookup("h", path))
		want := referenceMatch(routes, path)
		if got != want {
			t.Fatalf("routes %q path %q: Lookup = %s, reference = %s", routeList, path, got, want)
		}
	})
}

func benchRoutes(n int) []model.Route {
	routes := make([]model.Route, 0, n)
	for i := 0; i < n; i++ {
		host := fmt.Sprintf("h%d.example.com", i%10)
		routes = append(routes, prefix(host, fmt.Sprintf("/svc%04d/api", i)))
	}
	return routes
}

// BenchmarkLookup shows the lookup cost stays flat from 1 to 10,000 routes.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			routes := benchRoutes(n)
			tab := New(routes, nil)
			last := routes[n-1]
			path := last.Path + "/v1/items/42"
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if tab.Lookup(last.Host, path) == nil {
					b.Fatal("no match")
				}
			}
		})
	}
}
