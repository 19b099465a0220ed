package main

import (
	"net"
	"strings"
	"testing"
	"time"
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
			o:    runOptions{root: ".run", target: "revgate", fallbackTimeout: time.Minute, retryInitial: 2 * time.Minute},
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
			o: runOptions{root: "/r", target: "edge", httpAddr: ":18080", adminAddr: "127.0.0.1:19901",
				fallbackTimeout: time.Second, retryInitial: time.Second},
			want: []string{
				"--target=edge", "--lock-file=/r/edge.lock",
				"--proxy-arg=--http-addr=:18080", "--proxy-arg=--admin-addr=127.0.0.1:19901",
			},
			httpURL:  "http://127.0.0.1:18080",
			adminURL: "http://127.0.0.1:19901",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := strings.Join(tc.o.installArgs(tc.o.layout()), " ")
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
		{"good", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second}, true},
		{"no root", runOptions{fallbackTimeout: time.Second, retryInitial: time.Second}, false},
		{"zero timeout", runOptions{root: ".run", retryInitial: time.Second}, false},
		{"bad address", runOptions{root: ".run", fallbackTimeout: time.Second, retryInitial: time.Second, adminAddr: "9901"}, false},
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
	ln.Close()
	if err := (&runOptions{httpAddr: free(), adminAddr: busy}).checkPortsFree(); err != nil {
		t.Fatalf("free addresses: %v", err)
	}
}
