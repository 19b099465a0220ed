package cmdline

import (
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every field away from its default, with values that are awkward to
// render: a leading dash, an equals sign, spaces, an empty string.
func changedProxy() Proxy {
	return Proxy{
		Config: Config{Dirs: []string{"/a", "/b c", "-d"}, IngressClass: "edge", Namespace: "gw", RootNamespaces: []string{"x", "y"},
			Fallback: "backfill", LastKnownGoodDir: "/lkg=1"},
		Records:        Records{Revision: 12, TerminationLog: ""},
		Listeners:      Listeners{HTTP: "", HTTPS: "127.0.0.1:1", Admin: "[::1]:2"},
		EscapedSlashes: "keep", MergeSlashes: false, DrainTimeout: time.Second, ShutdownDelay: -1, AcceptGrace: 0,
		ReadHeaderTimeout: time.Minute, IdleTimeout: time.Hour, MaxHeaderBytes: 1,
		UpstreamDialTimeout: 2 * time.Second, UpstreamResponseHeaderTimeout: 3 * time.Second, UpstreamMaxIdleConns: 4,
		UpstreamMaxResponseHeaderBytes: 5, GCPercent: -1, Pprof: true, EndpointsFile: "/live/e.json",
		EndpointsRelistPeriod: 90 * time.Millisecond, LogLevel: "debug",
	}
}

func changedMonitor() Monitor {
	return Monitor{
		Revision: 3, Layout: Layout{Target: "edge", ResourceDir: "/r", ManifestsDir: "/m", LockFile: "/l", TerminationLog: "/t"},
		HealthzURL: "http://h/healthz", ReadyzURL: "http://h/readyz", FallbackTimeout: time.Second, ProbeInterval: time.Millisecond,
		ReadySuccesses: 1, CrashloopThreshold: 9, RetryInitial: time.Minute, RetryMax: time.Hour, Kubeconfig: "/k",
		NodeName: "-n", Namespace: "ns", LockTimeout: time.Second, Publish: "slots",
	}
}

func changedInstall() Install {
	return Install{
		SourceDir: "/src", Layout: Layout{Target: "edge", ResourceDir: "/r", ManifestsDir: "/m", LockFile: "/l", TerminationLog: "/t"},
		Revision: 4, Kubeconfig: "/k", NodeName: "n", Namespace: "ns", ConfigMaps: []string{"a", "b"}, Secrets: []string{"s"},
		OptionalConfigMaps: []string{"oc"}, OptionalSecrets: []string{"os"}, RevisionedNames: true, RetryTimeout: time.Second,
		Render: Render{Binary: "/bin/revgate", Image: "img", ImagePullPolicy: "Never", ProxyArgs: []string{"--admin-addr=:1", "--x y"},
			MonitorArgs: []string{"--fallback-timeout=1s"}, MonitorKubeconfig: "/mk", Publish: "replace", EndpointsFile: "/e"},
		LockTimeout: time.Minute, Strict: true, NoPublish: true,
	}
}

func TestArgsParseBack(t *testing.T) {
	check := func(t *testing.T, args []string, parse func([]string) (any, error), want any) {
		t.Helper()
		got, err := parse(args)
		if err != nil {
			t.Fatalf("%q does not parse: %v", args, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q parses as\n%+v\nwant\n%+v", args, got, want)
		}
	}
	parseProxy := func(a []string) (any, error) { return ParseProxy(a) }
	parseMonitor := func(a []string) (any, error) { return ParseMonitor(a) }
	parseInstall := func(a []string) (any, error) { return parse[Install](a) }
	for _, tc := range []struct {
		name  string
		args  []string
		parse func([]string) (any, error)
		want  any
	}{
		{"proxy defaults", NewProxy().Args(), parseProxy, NewProxy()},
		{"proxy changed", changedProxy().Args(), parseProxy, changedProxy()},
		{"proxy overrides", changedProxy().Overrides(), parseProxy, changedProxy()},
		{"monitor defaults", NewMonitor().Args(), parseMonitor, NewMonitor()},
		{"monitor changed", changedMonitor().Args(), parseMonitor, changedMonitor()},
		{"install defaults", NewInstall().Args(), parseInstall, NewInstall()},
		{"install changed", changedInstall().Args(), parseInstall, changedInstall()},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.args, tc.parse, tc.want) })
	}
}

// Args spells out where a pod's records and files are whatever the
// defaults; Overrides holds only what differs, so that appended to another
// command line it changes nothing else.
func TestArgsPinsAndOverrides(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"proxy args", NewProxy().Args(), []string{"--revision=0", "--termination-log=/var/log/revgate/termination.log"}},
		{"proxy overrides", NewProxy().Overrides(), nil},
		{"monitor args", NewMonitor().Args(), []string{"--target=revgate", "--resource-dir=/etc/kubernetes/static-pod-resources",
			"--manifests-dir=/etc/kubernetes/manifests", "--lock-file=", "--termination-log="}},
		{"monitor overrides", NewMonitor().Overrides(), nil},
		{"install", NewInstall().Args(), nil},
		{"one change", func() []string { p := NewProxy(); p.Admin = ":1"; return p.Overrides() }(), []string{"--admin-addr=:1"}},
		{"lists one element an argument", func() []string { p := NewProxy(); p.RootNamespaces = []string{"a", "b"}; return p.Overrides() }(),
			[]string{"--root-namespaces=a", "--root-namespaces=b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"fallback mode", `invalid fallback mode "sometimes": want exclude, backfill or off`, []string{"--fallback=sometimes"}},
		{"unknown flag", "unknown flag: --no-such-flag", []string{"--no-such-flag"}},
		{"positional argument", "unexpected arguments", []string{"dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseProxy(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMonitorAliases(t *testing.T) {
	m, err := ParseMonitor([]string{"--target-name=kas", "--installer-lock-file=/l", "--fallback-timeout-duration=7s"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Layout.Target != "kas" || m.Layout.LockFile != "/l" || m.FallbackTimeout != 7*time.Second {
		t.Fatalf("monitor %+v", m)
	}
	if args := m.Args(); slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "target-name") }) {
		t.Fatalf("aliases rendered: %q", args)
	}
}

func TestParseProxyPart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    Records
		wantErr string
	}{
		{"defaults", nil, Records{TerminationLog: "/var/log/revgate/termination.log"}, ""},
		{"among unknown and bad flags", []string{"proxy", "--no-such-flag", "--drain-timeout=soon", "--revision=7", "--termination-log", "/x/t.log", "-z"},
			Records{Revision: 7, TerminationLog: "/x/t.log"}, ""},
		{"the value of a skipped flag is not a flag", []string{"--config-dir", "--revision=9", "--revision=3"}, Records{Revision: 3, TerminationLog: "/var/log/revgate/termination.log"}, ""},
		{"a boolean flag takes no value", []string{"--pprof", "--revision=4"}, Records{Revision: 4, TerminationLog: "/var/log/revgate/termination.log"}, ""},
		{"a bad value is skipped and reported", []string{"--revision=5", "--revision=five", "--termination-log=/t"}, Records{Revision: 5, TerminationLog: "/t"}, `invalid argument "five" for --revision`},
		{"disabled", []string{"--termination-log="}, Records{}, ""},
		{"arguments after --", []string{"--revision=6", "--", "--revision=8"}, Records{Revision: 6, TerminationLog: "/var/log/revgate/termination.log"}, ""},
		{"a missing value", []string{"--revision=2", "--revision"}, Records{Revision: 2, TerminationLog: "/var/log/revgate/termination.log"}, "needs an argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Records
			err := ParseProxyPart(tc.args, &r)
			if r != tc.want {
				t.Errorf("records %+v, want %+v", r, tc.want)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	t.Run("several parts", func(t *testing.T) {
		var c Config
		var l Listeners
		if err := ParseProxyPart([]string{"--fallback=off", "--gc-percent=x", "--admin-addr=:1", "--root-namespaces=a,b"}, &c, &l); err != nil {
			t.Fatal(err)
		}
		if c.Fallback != "off" || !slices.Equal(c.RootNamespaces, []string{"a", "b"}) || c.IngressClass != "revgate" || l.Admin != ":1" || l.HTTP != ":8080" {
			t.Fatalf("config %+v listeners %+v", c, l)
		}
	})
}

func TestLocalEndpoint(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "127.0.0.1:8080",
		"0.0.0.0:9901":   "127.0.0.1:9901",
		"[::]:9901":      "127.0.0.1:9901",
		"10.0.0.5:9901":  "10.0.0.5:9901",
		"localhost:9901": "localhost:9901",
		"9901":           "",
		"host:0":         "",
		"host:http":      "",
	} {
		host, port, ok := LocalEndpoint(addr)
		got := ""
		if ok {
			got = net.JoinHostPort(host, strconv.Itoa(port))
		}
		if got != want {
			t.Errorf("LocalEndpoint(%q) = %q, want %q", addr, got, want)
		}
	}
}
