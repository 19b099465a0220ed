package main

import (
	"net"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/monitor"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/server"
	"github.com/revgate/revgate/proxy/upstream"
	"github.com/revgate/revgate/revisions"
)

// The flags' defaults are the defaults of the packages that do the work:
// a proxy, monitor or install started without a flag behaves as the
// package documents.
func TestFlagDefaultsAreThePackagesDefaults(t *testing.T) {
	t.Run("proxy", func(t *testing.T) {
		o := proxyOptions{Proxy: cmdline.NewProxy()}
		wantServer := server.Options{
			HTTPAddr: server.DefaultHTTPAddr, HTTPSAddr: server.DefaultHTTPSAddr, AdminAddr: server.DefaultAdminAddr,
			DrainTimeout: server.DefaultDrainTimeout, ShutdownDelay: server.DefaultShutdownDelay, AcceptGrace: server.DefaultAcceptGrace,
			ReadHeaderTimeout: server.DefaultReadHeaderTimeout, IdleTimeout: server.DefaultIdleTimeout, MaxHeaderBytes: server.DefaultMaxHeaderBytes,
			ClientBodyTimeout: server.DefaultClientBodyTimeout, SendTimeout: server.DefaultSendTimeout,
			Transport: upstream.TransportOptions{
				DialTimeout: upstream.DefaultDialTimeout, ResponseHeaderTimeout: upstream.DefaultResponseHeaderTimeout,
				MaxIdleConnsPerHost: upstream.DefaultMaxIdleConnsPerHost, MaxResponseHeaderBytes: upstream.DefaultMaxResponseHeaderBytes,
			},
			Paths:     route.PathOptions{EscapedSlashes: route.EscapedSlashesReject},
			Endpoints: server.EndpointsOptions{RelistPeriod: server.DefaultEndpointsRelistPeriod},
		}
		if got := o.serverOptions(); !reflect.DeepEqual(got, wantServer) {
			t.Errorf("server options of the default flags\n%+v\nwant\n%+v", got, wantServer)
		}
		wantConfig := config.Options{IngressClass: config.DefaultIngressClass, Namespace: config.DefaultNamespace, Fallback: model.FallbackExclude}
		if got := o.loadOptions(); !reflect.DeepEqual(got, wantConfig) {
			t.Errorf("config options of the default flags %+v, want %+v", got, wantConfig)
		}
		if want := revisions.DefaultTerminationLog(revisions.DefaultTarget); o.TerminationLog != want {
			t.Errorf("--termination-log %q, want %q", o.TerminationLog, want)
		}
	})
	t.Run("fallback modes", func(t *testing.T) {
		modes := cmdline.FallbackModes()
		if modes[0] != string(model.FallbackExclude) {
			t.Errorf("default fallback mode %q", modes[0])
		}
		for _, m := range modes {
			if _, err := model.ParseFallbackMode(m); err != nil {
				t.Errorf("the flag accepts %q, the model does not: %v", m, err)
			}
		}
		for _, m := range []model.FallbackMode{model.FallbackExclude, model.FallbackBackfill, model.FallbackOff} {
			if _, err := cmdline.ParseProxy([]string{"--fallback=" + string(m)}); err != nil {
				t.Errorf("the model has %q, the flag refuses it: %v", m, err)
			}
		}
	})
	t.Run("monitor", func(t *testing.T) {
		m := cmdline.NewMonitor()
		got := []any{m.HealthzURL, m.ReadyzURL, m.FallbackTimeout, m.ProbeInterval, m.ReadySuccesses, m.CrashloopThreshold,
			m.RetryInitial, m.RetryMax, m.Namespace, m.LockTimeout, m.Publish, revisions.Layout(m.Layout).Defaulted()}
		want := []any{monitor.DefaultHealthzURL, monitor.DefaultReadyzURL, monitor.DefaultFallbackTimeout, monitor.DefaultProbeInterval,
			monitor.DefaultReadySuccesses, monitor.DefaultCrashloopThreshold, monitor.DefaultRetryInitial, monitor.DefaultRetryMax,
			installer.PodNamespace, revisions.DefaultLockTimeout, string(revisions.PublishReplace), revisions.Layout{}.Defaulted()}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("monitor defaults\n%v\nwant\n%v", got, want)
		}
	})
	t.Run("install", func(t *testing.T) {
		in := cmdline.NewInstall()
		got := []any{in.RetryTimeout, in.LockTimeout, in.Render.Image, in.Render.ImagePullPolicy, in.Render.Publish, revisions.Layout(in.Layout).Defaulted()}
		want := []any{installer.DefaultRetryTimeout, revisions.DefaultLockTimeout, installer.DefaultImage,
			string(installer.DefaultImagePullPolicy), string(revisions.DefaultPublishMode), revisions.Layout{}.Defaulted()}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("install defaults\n%v\nwant\n%v", got, want)
		}
	})
}

// podCase is a command line that renders pods: `revgate install`,
// `revgate controller`, or `revgate run` through the install command it
// runs.
type podCase struct {
	name string
	// render parses the command line, with extra arguments, and returns the
	// layout and rendering options it hands the installer.
	render func(t *testing.T, extra ...string) (revisions.Layout, installer.RenderOptions)
	// admin is where the proxy's admin listener is reached.
	admin string
	// proxy and monitor set what the rendered commands should hold beyond
	// the revision, the layout, the live endpoints file, the admin URLs, the
	// kubeconfig and the publish mode.
	proxy   func(p *cmdline.Proxy)
	monitor func(m *cmdline.Monitor)
}

func installCase(name string, args []string, admin string, proxyWant func(*cmdline.Proxy), monitorWant func(*cmdline.Monitor)) podCase {
	return podCase{name: "install/" + name, admin: admin, proxy: proxyWant, monitor: monitorWant,
		render: func(t *testing.T, extra ...string) (revisions.Layout, installer.RenderOptions) {
			o := &installOptions{}
			cmd := &cobra.Command{}
			o.AddFlags(cmd.Flags())
			args := append([]string{"--source-dir=x", "--binary=/usr/bin/revgate"}, args...)
			if err := cmd.Flags().Parse(append(args, extra...)); err != nil {
				t.Fatal(err)
			}
			if err := o.validate(); err != nil {
				t.Fatal(err)
			}
			return o.layout, o.render
		}}
}

func controllerCase(name string, args []string, admin string, proxyWant func(*cmdline.Proxy)) podCase {
	return podCase{name: "controller/" + name, admin: admin, proxy: proxyWant,
		render: func(t *testing.T, extra ...string) (revisions.Layout, installer.RenderOptions) {
			args := append([]string{"--node-name=n1", "--binary=/usr/bin/revgate"}, args...)
			o, err := parseController(t, append(args, extra...))
			if err != nil {
				t.Fatal(err)
			}
			return o.Layout, o.Render
		}}
}

// TestRenderedPodCommandsParse renders every kind of pod command the
// installer and the controller produce, in both publish modes, and parses
// each with the real `revgate proxy` and `revgate monitor` commands: the
// values parsed are the values rendered, the free-form --proxy-arg and
// --monitor-arg values win over the rendered flags, and the probes and the
// monitor reach the admin listener where the proxy opens it.
func TestRenderedPodCommandsParse(t *testing.T) {
	live := "/srv/edge/resources/edge-live/endpoints.json"
	cases := []podCase{
		installCase("defaults", nil, "127.0.0.1:9901", nil, nil),
		installCase("every optional flag", []string{
			"--target=edge", "--resource-dir=/srv/edge/resources", "--manifests-dir=/srv/edge/manifests",
			"--lock-file=/srv/edge/run/edge.lock", "--termination-log=/srv/edge/run/termination.log",
			"--monitor-kubeconfig=/etc/kubernetes/node.kubeconfig", "--endpoints-file=" + live,
			"--proxy-arg=--admin-addr=0.0.0.0:9911", "--proxy-arg=--fallback=backfill", "--proxy-arg=--root-namespaces=a,b",
			"--proxy-arg=--merge-slashes=false", "--proxy-arg=--upstream-max-response-header-bytes=2097152",
			"--monitor-arg=--fallback-timeout=30s", "--monitor-arg=--node-name=n1",
		}, "127.0.0.1:9911", func(p *cmdline.Proxy) {
			p.Admin, p.Fallback, p.RootNamespaces, p.MergeSlashes, p.UpstreamMaxResponseHeaderBytes = "0.0.0.0:9911", "backfill", []string{"a", "b"}, false, 2<<20
		}, func(m *cmdline.Monitor) {
			m.FallbackTimeout, m.NodeName = 30*time.Second, "n1"
		}),
		installCase("admin address as two arguments", []string{"--proxy-arg=--admin-addr", "--proxy-arg=[::1]:9300"}, "[::1]:9300",
			func(p *cmdline.Proxy) { p.Admin = "[::1]:9300" }, nil),
		installCase("free-form arguments win", []string{"--proxy-arg=--admin-addr=127.0.0.2:9100", "--proxy-arg=--admin-addr=127.0.0.3:9200",
			"--monitor-arg=--healthz-url=http://127.0.0.9:1/healthz"}, "127.0.0.3:9200",
			func(p *cmdline.Proxy) { p.Admin = "127.0.0.3:9200" },
			func(m *cmdline.Monitor) { m.HealthzURL = "http://127.0.0.9:1/healthz" }),
		{name: "run", admin: "127.0.0.1:19901", render: func(t *testing.T, extra ...string) (revisions.Layout, installer.RenderOptions) {
			ro := &runOptions{root: t.TempDir(), target: "edge", httpAddr: ":18080", httpsAddr: "127.0.0.1:18443", adminAddr: "127.0.0.1:19901", fallbackTimeout: time.Minute, retryInitial: time.Second}
			return installCase("", ro.install(ro.layout()).Args(), "", nil, nil).render(t, extra...)
		}, proxy: func(p *cmdline.Proxy) { p.HTTP, p.HTTPS, p.Admin = ":18080", "127.0.0.1:18443", "127.0.0.1:19901" }, monitor: func(m *cmdline.Monitor) {
			m.FallbackTimeout, m.RetryInitial = time.Minute, time.Second
		}},
		controllerCase("defaults", nil, "127.0.0.1:9901", nil),
		controllerCase("the controller's class wins", []string{"--ingress-class=edge", "--proxy-arg=--ingress-class=other",
			"--proxy-arg=--http-addr=127.0.0.1:18080", "--proxy-arg=--admin-addr=127.0.0.1:19901"}, "127.0.0.1:19901",
			func(p *cmdline.Proxy) { p.IngressClass, p.HTTP, p.Admin = "edge", "127.0.0.1:18080", "127.0.0.1:19901" }),
	}
	for _, tc := range cases {
		for _, publish := range []revisions.PublishMode{revisions.PublishSlots, revisions.PublishReplace} {
			t.Run(tc.name+"/"+string(publish), func(t *testing.T) {
				l, ro := tc.render(t, "--publish="+string(publish))
				const rev = 7
				operand := installer.OperandPod(l, rev, ro, time.Now()).Spec.Containers[0]
				mon := installer.MonitorPod(l, rev, ro, time.Now()).Spec.Containers[0]

				wantProxy := cmdline.NewProxy()
				wantProxy.Dirs, wantProxy.Revision, wantProxy.TerminationLog = []string{l.RevisionDir(rev)}, rev, l.TerminationLog
				wantProxy.EndpointsFile = ro.EndpointsFile
				if tc.proxy != nil {
					tc.proxy(&wantProxy)
				}
				var po proxyOptions
				parsePod(t, newProxyCommand(&po), operand.Command, cmdline.ProxyCommand)
				if !reflect.DeepEqual(po.Proxy, wantProxy) {
					t.Errorf("proxy parsed from %q\n%+v\nwant\n%+v", operand.Command, po.Proxy, wantProxy)
				}
				if err := po.validate(); err != nil {
					t.Errorf("rendered proxy refuses its flags: %v", err)
				}

				wantMonitor := cmdline.NewMonitor()
				wantMonitor.Revision, wantMonitor.Layout = rev, cmdline.Layout(l)
				wantMonitor.HealthzURL, wantMonitor.ReadyzURL = "http://"+tc.admin+"/healthz", "http://"+tc.admin+"/readyz"
				wantMonitor.Kubeconfig, wantMonitor.Publish = ro.MonitorKubeconfig, string(publish)
				if tc.monitor != nil {
					tc.monitor(&wantMonitor)
				}
				var mo monitorOptions
				parsePod(t, newMonitorCommand(&mo), mon.Command, cmdline.MonitorCommand)
				if !reflect.DeepEqual(mo.Monitor, wantMonitor) {
					t.Errorf("monitor parsed from %q\n%+v\nwant\n%+v", mon.Command, mo.Monitor, wantMonitor)
				}
				if err := mo.validate(); err != nil {
					t.Errorf("rendered monitor refuses its flags: %v", err)
				}

				// The probes reach the admin listener the parsed proxy opens.
				for _, p := range []*corev1.Probe{operand.ReadinessProbe, operand.LivenessProbe} {
					at := net.JoinHostPort(p.HTTPGet.Host, strconv.Itoa(p.HTTPGet.Port.IntValue()))
					if at != tc.admin {
						t.Errorf("probe %s at %s, want %s (proxy --admin-addr=%s)", p.HTTPGet.Path, at, tc.admin, po.Admin)
					}
				}
			})
		}
	}
}

// parsePod checks that command runs the subcommand name of the rendered
// binary and parses its arguments with cmd, as cobra does when it runs it.
func parsePod(t *testing.T, cmd *cobra.Command, command []string, name string) {
	t.Helper()
	if len(command) < 2 || command[0] != "/usr/bin/revgate" || command[1] != name {
		t.Fatalf("command %q does not run revgate %s", command, name)
	}
	if err := cmd.ParseFlags(command[2:]); err != nil {
		t.Fatalf("revgate %s does not parse %q: %v", name, command[2:], err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Fatalf("revgate %s refuses the arguments of %q: %v", name, command[2:], err)
	}
}
