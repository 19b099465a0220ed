package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/revgate/revgate/demo"
	"github.com/revgate/revgate/proxy/config"
)

func TestRunInstallArgs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         runOptions
		want, not []string
		httpURL   string
		adminURL  string
	}{
		{
			name: "defaults",
			o:    runOptions{root: ".run", target: "revgate", httpsAddr: ":8443", fallbackTimeout: time.Minute, retryInitial: 2 * time.Minute},
			want: []string{
				"--resource-dir=.run/resources", "--manifests-dir=.run/manifests",
				"--lock-file=.run/revgate.lock", "--termination-log=.run/log/termination.log",
				"--monitor-arg=--fallback-timeout=1m0s", "--monitor-arg=--retry-initial=2m0s",
			},
			not:      []string{"--target=", "--proxy-arg", "--healthz-url"},
			httpURL:  defaultHTTPURL,
			adminURL: defaultAdminURL,
		},
		{
			name: "own addresses and target",
			o: runOptions{root: "/r", target: "edge", httpAddr: ":18080", httpsAddr: "127.0.0.1:18443", adminAddr: "127.0.0.1:19901",
				fallbackTimeout: time.Second, retryInitial: time.Second},
			want: []string{
				"--target=edge", "--lock-file=/r/edge.lock",
				"--proxy-arg=--http-addr=:18080", "--proxy-arg=--https-addr=127.0.0.1:18443", "--proxy-arg=--admin-addr=127.0.0.1:19901",
			},
			httpURL:  "http://127.0.0.1:18080",
			adminURL: "http://127.0.0.1:19901",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := strings.Join(tc.o.install(tc.o.layout()).Args(), " ")
			for _, w := range tc.want {
				if !strings.Contains(args, w) {
					t.Errorf("install args lack %q:\n%s", w, args)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(args, n) {
					t.Errorf("install args hold %q:\n%s", n, args)
				}
			}
			if h, a := tc.o.urls(); h != tc.httpURL || a != tc.adminURL {
				t.Errorf("urls %s %s, want %s %s", h, a, tc.httpURL, tc.adminURL)
			}
		})
	}
}

func TestRunValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    runOptions
		ok   bool
	}{
		{"good", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, demoPorts: []int{9081, 9082}}, true},
		{"no root", runOptions{fallbackTimeout: time.Second, retryInitial: time.Second, demoPorts: []int{9081, 9082}}, false},
		{"zero timeout", runOptions{root: ".run", retryInitial: time.Second, demoPorts: []int{9081, 9082}}, false},
		{"bad address", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, adminAddr: "9901", demoPorts: []int{9081, 9082}}, false},
		{"bad HTTPS address", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, httpsAddr: "8443", demoPorts: []int{9081, 9082}}, false},
		{"one demo port", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, demoPorts: []int{9081}}, false},
		{"demo port twice", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, demoPorts: []int{9081, 9081}}, false},
		{"demo port out of range", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, demoPorts: []int{9081, 70000}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.validate(); (err == nil) != tc.ok {
				t.Fatalf("validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestRunCheckPortsFree(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busy := ln.Addr().String()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	if err := (&runOptions{httpAddr: free(), adminAddr: busy}).checkPortsFree(); err == nil || !strings.Contains(err.Error(), busy) {
		t.Fatalf("admin address in use: got %v, want an error naming %s", err, busy)
	}
	if err := (&runOptions{httpAddr: free(), httpsAddr: busy, adminAddr: free()}).checkPortsFree(); err == nil || !strings.Contains(err.Error(), busy) {
		t.Fatalf("HTTPS address in use: got %v, want an error naming %s", err, busy)
	}
	ln.Close()
	if err := (&runOptions{httpAddr: free(), adminAddr: busy}).checkPortsFree(); err != nil {
		t.Fatalf("free addresses: %v", err)
	}
}

// Without --source, run installs ./examples when the folder exists (a
// checkout), and otherwise the embedded copy written under the root: before,
// `revgate run` outside the repository failed with "open examples: no such
// file or directory".
func TestRunResolveSource(t *testing.T) {
	for _, tc := range []struct {
		name         string
		source       string
		haveExamples bool
		want         string
		embedded     bool
	}{
		{name: "given", source: "mine", haveExamples: true, want: "mine"},
		{name: "checkout", haveExamples: true, want: "examples"},
		{name: "empty folder", want: filepath.Join(".run", "examples"), embedded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if tc.haveExamples {
				if err := os.Mkdir("examples", 0o755); err != nil {
					t.Fatal(err)
				}
			}
			o := &runOptions{root: ".run", source: tc.source}
			o.resolveSource()
			if o.source != tc.want || o.embedded != tc.embedded {
				t.Fatalf("source %q embedded %v, want %q %v", o.source, o.embedded, tc.want, tc.embedded)
			}
		})
	}
}

// The embedded examples written with other demo ports are served by the
// upstreams at those ports, and nothing points at the default ones.
func TestWriteExamplesMovesDemoPorts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports []int
	}{
		{"defaults", demoDefaultPorts()},
		{"moved", []int{19081, 19082}},
		{"swapped", []int{9082, 9081}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "examples")
			if err := writeExamples(dir, tc.ports); err != nil {
				t.Fatal(err)
			}
			snap, err := config.Build(config.Options{Dirs: []string{dir}})
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Errors()) > 0 {
				t.Fatalf("problems: %+v", snap.Problems)
			}
			o := &runOptions{demoPorts: tc.ports}
			var addrs []string
			for _, u := range o.demoUpstreams() {
				addrs = append(addrs, u.Addr)
			}
			// web → upstream-1, web-v2 → upstream-2, as in the examples.
			for key, want := range map[string]string{"shop/web:80": addrs[0], "shop/web-v2:80": addrs[1], "team-a/api:8080": addrs[1], "team-a/api-v2:8080": addrs[0]} {
				b := snap.Backends[key]
				if b == nil || !slices.Equal(b.Endpoints, []string{want}) {
					t.Errorf("backend %s: %+v, want endpoints [%s]", key, b, want)
				}
			}
			if tc.name == "defaults" && !slices.Equal(addrs, []string{demo.DefaultUpstreams[0].Addr, demo.DefaultUpstreams[1].Addr}) {
				t.Errorf("default demo upstreams %v", addrs)
			}
		})
	}
}
