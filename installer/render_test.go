package installer_test

import (
	"bytes"
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/revisions"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var installedAt = time.Date(2026, 11, 22, 0, 30, 0, 0, time.UTC)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", name, got)
	}
}

// TestRenderGolden renders both pods of revision 7 and compares them with
// the golden files. The replace publish mode keeps the manifests as they
// always were, byte for byte (default-* and custom-*); the slots mode
// renders the same operand manifest into the revision and tells the monitor
// its mode (slots-*-startup-monitor.yaml), and the operand manifest it
// publishes into slot b carries the slot's name, label and uid
// (slots-*.b-pod.yaml).
func TestRenderGolden(t *testing.T) {
	defaultLayout := revisions.Layout{}.Defaulted()
	customLayout := revisions.Layout{
		Target: "edge", ResourceDir: "/srv/edge/resources", ManifestsDir: "/srv/edge/manifests",
		LockFile: "/srv/edge/run/edge.lock", TerminationLog: "/srv/edge/run/termination.log",
	}.Defaulted()
	customOpts := installer.RenderOptions{
		Binary: "/opt/revgate/bin/revgate", Image: "registry.local/revgate:v1", ImagePullPolicy: corev1.PullNever,
		ProxyArgs: []string{"--admin-addr=:9911", "--fallback=backfill"}, MonitorArgs: []string{"--fallback-timeout=30s"},
		MonitorKubeconfig: "/etc/kubernetes/kubeconfigs/node.kubeconfig",
	}
	withPublish := func(o installer.RenderOptions, p revisions.PublishMode) installer.RenderOptions {
		o.Publish = p
		return o
	}
	for _, tt := range []struct {
		name   string
		layout revisions.Layout
		opts   installer.RenderOptions
		// operand and monitor prefix the golden files of the two pods.
		operand, monitor string
		// slot, when set, is the golden file of the operand published into slot b.
		slot string
	}{
		{name: "default/replace", layout: defaultLayout, opts: withPublish(installer.RenderOptions{Binary: "/usr/bin/revgate"}, revisions.PublishReplace),
			operand: "default", monitor: "default"},
		// Lock and log in one folder: mounted once.
		{name: "custom/replace", layout: customLayout, opts: withPublish(customOpts, revisions.PublishReplace),
			operand: "custom", monitor: "custom"},
		{name: "default/slots", layout: defaultLayout, opts: installer.RenderOptions{Binary: "/usr/bin/revgate"},
			operand: "default", monitor: "slots-default", slot: "slots-default-revgate-b-pod.yaml"},
		{name: "custom/slots", layout: customLayout, opts: withPublish(customOpts, revisions.PublishSlots),
			operand: "custom", monitor: "slots-custom", slot: "slots-custom-edge-b-pod.yaml"},
		// Live endpoints: the file's folder is mounted, not the file.
		{name: "live/replace", layout: defaultLayout, opts: withPublish(installer.RenderOptions{Binary: "/usr/bin/revgate",
			EndpointsFile: defaultLayout.EndpointsFile()}, revisions.PublishReplace), operand: "live", monitor: "live"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range []struct {
				pod    *corev1.Pod
				prefix string
			}{
				{installer.OperandPod(tt.layout, 7, tt.opts, installedAt), tt.operand},
				{installer.MonitorPod(tt.layout, 7, tt.opts, installedAt), tt.monitor},
			} {
				pod := p.pod
				data, err := installer.Marshal(pod)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, p.prefix+"-"+pod.Name+".yaml", data)
				// The manifest is a valid Pod that the revision label reads back from.
				var back corev1.Pod
				if err := yaml.UnmarshalStrict(data, &back); err != nil {
					t.Fatalf("manifest does not parse back: %v", err)
				}
				if n, err := revisions.RevisionLabelOf(data, pod.Name); err != nil || n != 7 {
					t.Fatalf("revision label: %d %v", n, err)
				}
				seen := map[string]bool{}
				for _, m := range back.Spec.Containers[0].VolumeMounts {
					if seen[m.MountPath] {
						t.Fatalf("mount path %s twice", m.MountPath)
					}
					seen[m.MountPath] = true
				}
				if tt.slot == "" || pod.Name != tt.layout.Target {
					continue
				}
				slotted, err := tt.layout.SlotManifest(data, revisions.SlotB, "3f1c2b4e-8d7a-4e2b-9c1d-5a6b7c8d9e0f")
				if err != nil {
					t.Fatal(err)
				}
				golden(t, tt.slot, slotted)
				if err := yaml.UnmarshalStrict(slotted, &back); err != nil {
					t.Fatalf("slot manifest does not parse back as a Pod: %v", err)
				}
				if back.Name != tt.layout.SlotPodName(revisions.SlotB) || back.UID == "" || back.Labels[revisions.SlotLabel] != "b" {
					t.Fatalf("slot manifest metadata %+v", back.ObjectMeta)
				}
			}
		})
	}
}

// The probes and the startup monitor reach the proxy where its arguments
// put the admin listener, as the proxy reads them.
func TestAdminEndpointFollowsProxyArgs(t *testing.T) {
	l := revisions.Layout{}.Defaulted()
	for _, tt := range []struct {
		name string
		args []string
		host string
		port int
	}{
		{"default", nil, "127.0.0.1", 9901},
		{"equals", []string{"--http-addr=:8080", "--admin-addr=127.0.0.2:9100"}, "127.0.0.2", 9100},
		{"separate value", []string{"--admin-addr", "[::1]:9200"}, "::1", 9200},
		{"wildcard host", []string{"--admin-addr=0.0.0.0:9300"}, "127.0.0.1", 9300},
		{"empty host", []string{"--admin-addr=:9400"}, "127.0.0.1", 9400},
		{"last wins", []string{"--admin-addr=:9500", "--admin-addr=:9600"}, "127.0.0.1", 9600},
		{"unusable ignored", []string{"--admin-addr=nonsense", "--admin-addr=:0"}, "127.0.0.1", 9901},
		{"disabled", []string{"--admin-addr="}, "127.0.0.1", 9901},
		{"other flag", []string{"--admin-address=:9700"}, "127.0.0.1", 9901},
		{"beside flags that do not parse", []string{"--no-such-flag", "--drain-timeout=soon", "--admin-addr=:9800"}, "127.0.0.1", 9800},
		{"value of a skipped flag", []string{"--idle-timeout", "--admin-addr=:9900"}, "127.0.0.1", 9901},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := installer.RenderOptions{Binary: "/usr/bin/revgate", ProxyArgs: tt.args}
			c := installer.OperandPod(l, 7, o, installedAt).Spec.Containers[0]
			for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
				if g := p.HTTPGet; g.Host != tt.host || g.Port.IntValue() != tt.port {
					t.Fatalf("probe %s at %s:%d, want %s:%d", g.Path, g.Host, g.Port.IntValue(), tt.host, tt.port)
				}
			}
			healthz := "--healthz-url=http://" + net.JoinHostPort(tt.host, strconv.Itoa(tt.port)) + "/healthz"
			cmd := installer.MonitorPod(l, 7, o, installedAt).Spec.Containers[0].Command
			if moved := tt.port != 9901 || tt.host != "127.0.0.1"; slices.Contains(cmd, healthz) != moved {
				t.Fatalf("monitor command %q, want %s only when the address moved", cmd, healthz)
			}
		})
	}
}
