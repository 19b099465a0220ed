package route

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

var (
	rejectOpts   = PathOptions{}
	keepOpts     = PathOptions{EscapedSlashes: EscapedSlashesKeep}
	unescapeOpts = PathOptions{EscapedSlashes: EscapedSlashesUnescape}
	noMergeOpts  = PathOptions{KeepRepeatedSlashes: true}
)

// TestNormalizePath covers the path-confusion forms: dot segments in every
// spelling, escaped slashes and backslashes by action, repeated slashes,
// climbing above the root and the canonical escape form.
func TestNormalizePath(t *testing.T) {
	cases := []struct {
		name string
		in   string
		opts PathOptions
		want string // "" when refused
		err  *PathError
	}{
		{"plain", "/public/x", rejectOpts, "/public/x", nil},
		{"root", "/", rejectOpts, "/", nil},
		{"empty is root", "", rejectOpts, "/", nil},
		{"trailing slash kept", "/a/b/", rejectOpts, "/a/b/", nil},
		{"file with dots", "/static/app.min.js", rejectOpts, "/static/app.min.js", nil},
		{"dots inside a name", "/a/..b/c../.d", rejectOpts, "/a/..b/c../.d", nil},
		{"sub-delims stay", "/a;b=c/d!e*f(g)'h+i,j$k&l:m@n", rejectOpts, "/a;b=c/d!e*f(g)'h+i,j$k&l:m@n", nil},

		// The bypass of the report and its spellings.
		{"%2e%2e", "/public/%2e%2e/admin/x", rejectOpts, "/admin/x", nil},
		{".%2e", "/public/.%2e/admin/x", rejectOpts, "/admin/x", nil},
		{"%2E%2E", "/public/%2E%2E/admin/x", rejectOpts, "/admin/x", nil},
		{"%2e.", "/public/%2e./admin/x", rejectOpts, "/admin/x", nil},
		{"literal ..", "/public/../admin/x", rejectOpts, "/admin/x", nil},
		{"..%2f rejected", "/public/..%2fadmin/x", rejectOpts, "", errEscapedSlash},
		{"%2e%2e%2f rejected", "/public/%2e%2e%2fadmin/x", rejectOpts, "", errEscapedSlash},
		{"..%2f unescaped", "/public/..%2fadmin/x", unescapeOpts, "/admin/x", nil},
		{"%2e%2e%2f unescaped", "/public/%2e%2e%2fadmin/x", unescapeOpts, "/admin/x", nil},
		{"..%2f kept is still refused", "/public/..%2fadmin/x", keepOpts, "", errHiddenDotSeg},
		{"single dot", "/a/./b/.", rejectOpts, "/a/b/", nil},
		{"dot dot at end", "/a/b/..", rejectOpts, "/a/", nil},
		{"back to root", "/a/..", rejectOpts, "/", nil},

		// Above the root.
		{"climb", "/../etc/passwd", rejectOpts, "", errAboveRoot},
		{"climb encoded", "/%2e%2e/etc", rejectOpts, "", errAboveRoot},
		{"climb after one", "/a/../../b", rejectOpts, "", errAboveRoot},
		{"climb to end", "/..", rejectOpts, "", errAboveRoot},

		// Slashes and backslashes.
		{"%2F rejected", "/a%2Fb", rejectOpts, "", errEscapedSlash},
		{"%2F kept", "/a%2fb", keepOpts, "/a%2Fb", nil},
		{"%2F unescaped", "/a%2Fb", unescapeOpts, "/a/b", nil},
		{"%5C rejected", "/a%5cb", rejectOpts, "", errBackslash},
		{"backslash rejected", `/a\b`, rejectOpts, "", errBackslash},
		{"backslash kept encoded", `/a\b`, keepOpts, "/a%5Cb", nil},
		{"backslash unescaped", `/a\..\b`, unescapeOpts, "/b", nil},
		{"backslash dots kept refused", `/public/..\admin`, keepOpts, "", errHiddenDotSeg},
		{"merged", "//a///b//", rejectOpts, "/a/b/", nil},
		{"not merged", "//a///b", noMergeOpts, "//a///b", nil},
		{"not merged with dots", "/a//..", noMergeOpts, "/a/", nil},

		// Parameters and hidden dot segments.
		{"tomcat ..;", "/public/..;/admin", rejectOpts, "", errHiddenDotSeg},
		{"tomcat .;", "/public/.;x/admin", rejectOpts, "", errHiddenDotSeg},
		{"encoded ;", "/public/..%3B/admin", rejectOpts, "", errHiddenDotSeg},
		{"encoded dots and ;", "/public/%2E%2E%3Bjsessionid=1/admin", rejectOpts, "", errHiddenDotSeg},
		{"params elsewhere", "/a;v=1/b", rejectOpts, "/a;v=1/b", nil},

		// Escapes.
		{"unreserved decoded", "/%41%7e%2D%5f", rejectOpts, "/A~-_", nil},
		{"reserved kept upper", "/a%3fb%23c%25d", rejectOpts, "/a%3Fb%23c%25d", nil},
		{"double encoding stays data", "/public/%252e%252e/admin", rejectOpts, "/public/%252e%252e/admin", nil},
		{"raw bytes encoded", "/caf\xc3\xa9/\"q\"", rejectOpts, "/caf%C3%A9/%22q%22", nil},
		{"NUL", "/a%00b", rejectOpts, "", errNUL},
		{"bad escape", "/a%zz", rejectOpts, "", errBadEscape},
		{"short escape", "/a%4", rejectOpts, "", errBadEscape},
		{"asterisk form", "*", rejectOpts, "", errNotAbsolute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := NormalizePath(c.in, c.opts)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("NormalizePath(%q) = %q, %v; want error %v", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("NormalizePath(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			again, err := NormalizePath(got, c.opts)
			if err != nil || again != got {
				t.Fatalf("not idempotent: NormalizePath(%q) = %q, %v", got, again, err)
			}
		})
	}
}

func TestNormalizePathCanonicalDoesNotAllocate(t *testing.T) {
	for _, p := range []string{"/", "/svc0999/v1/items/42", "/static/app.min.js", "/a;b=c/d/"} {
		if n := testing.AllocsPerRun(100, func() { _, _ = NormalizePath(p, rejectOpts) }); n != 0 {
			t.Errorf("NormalizePath(%q) allocates %v times", p, n)
		}
	}
}

// hostileUpstream resolves a path as the most permissive upstream would:
// it decodes every escape once, takes '\' for '/', merges slashes and
// resolves dot segments, also those followed by ";parameters" (as Tomcat
// does), clamping at the root. decodeSlashes says whether %2F and %5C
// become separators.
func hostileUpstream(p string, decodeSlashes bool) string {
	if !decodeSlashes {
		p = strings.NewReplacer("%2F", "\x01", "%5C", "\x02").Replace(p)
	}
	p = decodeAll(p)
	p = strings.ReplaceAll(p, `\`, "/")
	var out []string
	trailing := false
	for _, s := range strings.Split(p, "/") {
		dot := s
		if i := strings.IndexByte(s, ';'); i >= 0 {
			dot = s[:i]
		}
		if dot == "." || dot == ".." {
			s = dot
		}
		trailing = s == "" || s == "." || s == ".."
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	res := "/" + strings.Join(out, "/")
	if trailing && len(out) > 0 {
		res += "/"
	}
	if !decodeSlashes {
		res = strings.NewReplacer("\x01", "%2F", "\x02", "%5C").Replace(res)
	}
	return res
}

// fuzzTable is a routing table with neighbouring routes that a confused
// path could move between.
func fuzzTable() *Table {
	var routes []model.Route
	for _, p := range []string{"/", "/public", "/admin", "/public/admin", "/a/b", "/a", "/x;y"} {
		routes = append(routes, prefix("", p))
	}
	for _, p := range []string{"/public/exact", "/admin/"} {
		routes = append(routes, exact("", p))
	}
	return New(routes, nil)
}

// FuzzNormalizeRoute is the differential check behind the gateway's path
// handling: for any request target, the path the gateway forwards is the
// path it matched, matching it again (as a second gateway would) gives the
// same route, and an upstream that resolves the forwarded path as
// permissively as hostileUpstream does still lands on the same route.
func FuzzNormalizeRoute(f *testing.F) {
	for _, s := range []string{
		"/public/%2e%2e/admin/x", "/public/.%2e/admin", "/public/%2E%2E/admin", "/public/..%2fadmin",
		"/public/%2e%2e%2fadmin", "/public/..;/admin", `/public/..\admin`, "/public//../admin",
		"/a/b/../../admin", "/x;y/../admin", "/public/%252e%252e/admin", "/public/exact/.", "/admin/.",
		"http://h/public/%2e%2e/admin?q", "/public/..%3badmin", "/%2e%2e", "/public/a%2f..%2f..%2fadmin",
	} {
		for mode := uint8(0); mode < 4; mode++ {
			f.Add(s, mode)
		}
	}
	tab := fuzzTable()
	f.Fuzz(func(t *testing.T, target string, mode uint8) {
		opts := []PathOptions{rejectOpts, keepOpts, unescapeOpts, noMergeOpts}[mode%4]
		// The gateway sees the path as net/http parses the request target.
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return // net/http answers 400 itself
		}
		fwd, err := NormalizePath(u.EscapedPath(), opts)
		if err != nil {
			return // the gateway answers 400
		}
		matched := name(tab.Lookup("h", fwd))
		// The forwarded request line, parsed again on the other side.
		u2, err := url.ParseRequestURI(fwd)
		if err != nil {
			t.Fatalf("target %q: forwarded path %q does not parse: %v", target, fwd, err)
		}
		if u2.EscapedPath() != fwd {
			t.Fatalf("target %q: forwarded %q arrives as %q", target, fwd, u2.EscapedPath())
		}
		again, err := NormalizePath(u2.EscapedPath(), opts)
		if err != nil || again != fwd {
			t.Fatalf("target %q: forwarded %q normalizes again to %q, %v", target, fwd, again, err)
		}
		if got := name(tab.Lookup("h", again)); got != matched {
			t.Fatalf("target %q: matched %s, forwarded path %q matches %s", target, matched, fwd, got)
		}
		if opts.KeepRepeatedSlashes {
			return // documented: an upstream merging slashes may differ
		}
		decodeSlashes := opts.EscapedSlashes != EscapedSlashesKeep
		h := hostileUpstream(fwd, decodeSlashes)
		if got := name(tab.Lookup("h", h)); got != matched {
			t.Fatalf("target %q: matched %s at %q; an upstream resolving it to %q is at %s", target, matched, fwd, h, got)
		}
	})
}

// BenchmarkNormalizePath: a canonical path (the common case) and one that
// needs rewriting.
func BenchmarkNormalizePath(b *testing.B) {
	for name, p := range map[string]string{"canonical": "/svc0999/v1/items/42", "rewritten": "/svc0999/v1/./items/%7e42"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := NormalizePath(p, PathOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
