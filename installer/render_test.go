package installer_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
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

func TestRenderGolden(t *testing.T) {
	for _, tt := range []struct {
		name   string
		layout revisions.Layout
		opts   installer.RenderOptions
	}{
		{
			name:   "default",
			layout: revisions.Layout{}.Defaulted(),
			opts:   installer.RenderOptions{Binary: "/usr/bin/revgate"},
		},
		{
			// Lock and log in one folder: mounted once.
			name: "custom",
			layout: revisions.Layout{
				Target: "edge", ResourceDir: "/srv/edge/resources", ManifestsDir: "/srv/edge/manifests",
				LockFile: "/srv/edge/run/edge.lock", TerminationLog: "/srv/edge/run/termination.log",
			}.Defaulted(),
			opts: installer.RenderOptions{
				Binary: "/opt/revgate/bin/revgate", Image: "registry.local/revgate:v1", ImagePullPolicy: corev1.PullNever,
				ProxyArgs: []string{"--admin-addr=:9911", "--fallback=backfill"}, MonitorArgs: []string{"--fallback-timeout=30s"},
				MonitorKubeconfig: "/etc/kubernetes/kubeconfigs/node.kubeconfig",
			},
		},
		{
			// Live endpoints: the file's folder is mounted, not the file.
			name:   "live",
			layout: revisions.Layout{}.Defaulted(),
			opts:   installer.RenderOptions{Binary: "/usr/bin/revgate", EndpointsFile: revisions.Layout{}.Defaulted().EndpointsFile()},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, pod := range []*corev1.Pod{
				installer.OperandPod(tt.layout, 7, tt.opts, installedAt),
				installer.MonitorPod(tt.layout, 7, tt.opts, installedAt),
			} {
				data, err := installer.Marshal(pod)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, tt.name+"-"+pod.Name+".yaml", data)
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
			}
		})
	}
}

func TestAdminEndpoint(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		host  string
		port  int
		given bool
	}{
		{"default", nil, "127.0.0.1", 9901, false},
		{"equals", []string{"--http-addr=:8080", "--admin-addr=127.0.0.2:9100"}, "127.0.0.2", 9100, true},
		{"separate value", []string{"--admin-addr", "[::1]:9200"}, "::1", 9200, true},
		{"wildcard host", []string{"--admin-addr=0.0.0.0:9300"}, "127.0.0.1", 9300, true},
		{"empty host", []string{"--admin-addr=:9400"}, "127.0.0.1", 9400, true},
		{"last wins", []string{"--admin-addr=:9500", "--admin-addr=:9600"}, "127.0.0.1", 9600, true},
		{"unusable ignored", []string{"--admin-addr=nonsense", "--admin-addr=:0"}, "127.0.0.1", 9901, false},
		{"other flag", []string{"--admin-address=:9700"}, "127.0.0.1", 9901, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			host, port, given := installer.AdminEndpoint(tt.args)
			if host != tt.host || port != tt.port || given != tt.given {
				t.Fatalf("got %s:%d %v, want %s:%d %v", host, port, given, tt.host, tt.port, tt.given)
			}
		})
	}
}
