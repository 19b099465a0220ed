package admin

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestChecks(t *testing.T) {
	ok := Check{Name: "config", Run: func() (string, error) { return "", nil }}
	detail := Check{Name: "fallback", Run: func() (string, error) { return "0 broken, 0 excluded, 0 backfilled objects", nil }}
	bad := Check{Name: "dependency/upstreams", Run: func() (string, error) { return "", errors.New("backend ns/a:80 has no healthy endpoint") }}
	h := NewHandler(Options{
		Revision: 7, PID: 42,
		Healthz: []Check{ok, detail},
		Readyz:  []Check{ok, detail, bad},
		Debug:   map[string]func() any{"/debug/config/fallback": func() any { return map[string]string{"status": "not-triggered"} }},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	cases := []struct {
		name     string
		path     string
		code     int
		body     string
		contains []string
	}{
		{name: "healthz ok", path: "/healthz", code: 200, body: "ok"},
		{name: "healthz verbose", path: "/healthz?verbose", code: 200, contains: []string{"[+]config ok\n", "[+]fallback ok: 0 broken", "healthz check passed\n"}},
		{name: "readyz failed", path: "/readyz", code: 500, contains: []string{"[-]dependency/upstreams failed: backend ns/a:80 has no healthy endpoint\n", "readyz check failed\n"}},
		{name: "readyz exclude", path: "/readyz?exclude=dependency/upstreams&verbose", code: 200, contains: []string{"[+]dependency/upstreams excluded: ok", "readyz check passed"}},
		{name: "single check", path: "/readyz/config", code: 200, body: "ok"},
		{name: "single failing check", path: "/readyz/dependency/upstreams", code: 500},
		{name: "debug json", path: "/debug/config/fallback", code: 200, contains: []string{`"status": "not-triggered"`}},
		{name: "unknown", path: "/nope", code: 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("status %d, want %d; body %q", resp.StatusCode, tc.code, b)
			}
			if tc.body != "" && string(b) != tc.body {
				t.Errorf("body %q, want %q", b, tc.body)
			}
			for _, s := range tc.contains {
				if !strings.Contains(string(b), s) {
					t.Errorf("body %q lacks %q", b, s)
				}
			}
			if resp.Header.Get(HeaderRevision) != "7" || resp.Header.Get(HeaderPID) != "42" || resp.Header.Get("Server") != "revgate" {
				t.Errorf("identity headers %v", resp.Header)
			}
		})
	}
}
