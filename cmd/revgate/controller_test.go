package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/controller/rollout"
	"github.com/revgate/revgate/proxy/model"
)

// parseController parses and validates the controller's flags.
func parseController(t *testing.T, args []string) (*controllerOptions, error) {
	t.Helper()
	o := &controllerOptions{}
	cmd := &cobra.Command{}
	o.addFlags(cmd)
	if err := cmd.Flags().Parse(args); err != nil {
		return nil, err
	}
	return o, o.validate()
}

func TestControllerFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o *controllerOptions)
	}{
		{name: "defaults", args: []string{"--node-name=n1"}, check: func(t *testing.T, o *controllerOptions) {
			if o.Layout.ResourceDir != "/etc/kubernetes/static-pod-resources" || o.Layout.LockFile != "/var/lock/revgate-installer.lock" {
				t.Fatalf("layout %+v", o.Layout)
			}
			if o.QuietPeriod != time.Second || o.MaxDelay != 10*time.Second || o.IngressClass != "revgate" || len(o.Namespaces) != 0 {
				t.Fatalf("options %+v", o.Options)
			}
			if !reflect.DeepEqual(o.Render.ProxyArgs, []string{"--ingress-class=revgate"}) {
				t.Fatalf("proxy args %v: the proxy must serve the controller's class", o.Render.ProxyArgs)
			}
			if o.Render.EndpointsFile != "/etc/kubernetes/static-pod-resources/revgate-live/endpoints.json" {
				t.Fatalf("endpoints file %q: the proxy must follow the file the controller writes", o.Render.EndpointsFile)
			}
		}},
		{name: "the proxy's options come from its arguments", args: []string{"--node-name=n1", "--ingress-class=edge", "--proxy-arg=--fallback=backfill", "--proxy-arg=--root-namespaces=a,b"},
			check: func(t *testing.T, o *controllerOptions) {
				if o.Config.IngressClass != "edge" || o.Config.Fallback != model.FallbackBackfill || !reflect.DeepEqual(o.Config.RootNamespaces, []string{"a", "b"}) {
					t.Fatalf("config options %+v", o.Config)
				}
				if got := o.Render.ProxyArgs[len(o.Render.ProxyArgs)-1]; got != "--ingress-class=edge" {
					t.Fatalf("last proxy arg %q", got)
				}
			}},
		{name: "namespaces", args: []string{"--node-name=n1", "--namespaces=a,b", "--namespaces=c"}, check: func(t *testing.T, o *controllerOptions) {
			if !reflect.DeepEqual(o.Namespaces, []string{"a", "b", "c"}) {
				t.Fatalf("namespaces %v", o.Namespaces)
			}
		}},
		{name: "bad namespace", args: []string{"--node-name=n1", "--namespaces=Bad_NS"}, wantErr: "Bad_NS"},
		{name: "bad class", args: []string{"--node-name=n1", "--ingress-class=No Class"}, wantErr: "--ingress-class"},
		{name: "bad publish address", args: []string{"--node-name=n1", "--publish-address=not an address"}, wantErr: "--publish-address"},
		{name: "max delay below quiet period", args: []string{"--node-name=n1", "--sync-quiet-period=5s", "--sync-max-delay=1s"}, wantErr: "--sync-max-delay"},
		{name: "no node name", args: []string{"--node-name="}, wantErr: "--node-name"},
		{name: "bad pull policy", args: []string{"--node-name=n1", "--image-pull-policy=Sometimes"}, wantErr: "Sometimes"},
		{name: "rollouts are immediate by default", args: []string{"--node-name=n1"}, check: func(t *testing.T, o *controllerOptions) {
			if o.Rollout.NodeByNode() || o.Rollout.Mode != rollout.ModeImmediate {
				t.Fatalf("rollout %+v", o.Rollout)
			}
		}},
		{name: "node by node", args: []string{"--node-name=n1", "--rollout=node-by-node", "--rollout-namespace=gateways", "--rollout-lease-duration=15s", "--rollout-poll=1s", "--rollout-stopped-recheck=20s"},
			check: func(t *testing.T, o *controllerOptions) {
				want := rollout.Flags{Mode: rollout.ModeNodeByNode, Namespace: "gateways", LeaseDuration: 15 * time.Second, Poll: time.Second, StoppedRecheck: 20 * time.Second}
				if !o.Rollout.NodeByNode() || o.Rollout != want {
					t.Fatalf("rollout %+v, want %+v", o.Rollout, want)
				}
			}},
		{name: "node by node defaults", args: []string{"--node-name=n1", "--rollout=node-by-node"}, check: func(t *testing.T, o *controllerOptions) {
			if o.Rollout.Namespace != "kube-system" || o.Rollout.LeaseDuration != 40*time.Second || o.Rollout.Poll != 5*time.Second || o.Rollout.StoppedRecheck != time.Minute {
				t.Fatalf("rollout %+v", o.Rollout)
			}
		}},
		{name: "unknown rollout", args: []string{"--node-name=n1", "--rollout=all-at-once"}, wantErr: `--rollout "all-at-once"`},
		{name: "bad rollout namespace", args: []string{"--node-name=n1", "--rollout=node-by-node", "--rollout-namespace=Kube_System"}, wantErr: "--rollout-namespace"},
		{name: "rollout lease too short", args: []string{"--node-name=n1", "--rollout=node-by-node", "--rollout-lease-duration=1s"}, wantErr: "--rollout-lease-duration"},
		{name: "rollout recheck not positive", args: []string{"--node-name=n1", "--rollout=node-by-node", "--rollout-stopped-recheck=0s"}, wantErr: "--rollout-stopped-recheck"},
		{name: "node name that cannot name a Lease", args: []string{"--node-name=Node_1", "--rollout=node-by-node"}, wantErr: `--node-name "Node_1"`},
		{name: "any node name without node-by-node rollouts", args: []string{"--node-name=Node_1"}},
		{name: "proxy listeners sharing an address", args: []string{"--node-name=n1", "--proxy-arg=--http-addr=127.0.0.1:8080", "--proxy-arg=--admin-addr=127.0.0.1:8080"}, wantErr: "--proxy-arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseController(t, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error naming %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

// The controller's static pod and systemd unit in deploy/ run a command
// whose flags the controller accepts.
func TestDeployedControllerCommands(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy", "controller")
	data, err := os.ReadFile(filepath.Join(dir, "revgate-controller-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatalf("static pod: %v", err)
	}
	unit, err := os.ReadFile(filepath.Join(dir, "revgate-controller.service"))
	if err != nil {
		t.Fatal(err)
	}
	exec := regexp.MustCompile(`(?m)^ExecStart=((?:.*\\\n)*.*)$`).FindSubmatch(unit)
	if exec == nil {
		t.Fatal("no ExecStart in the unit")
	}
	unitArgs := strings.Fields(strings.ReplaceAll(string(exec[1]), "\\\n", " "))
	for name, cmd := range map[string][]string{"static pod": pod.Spec.Containers[0].Command, "systemd unit": unitArgs} {
		t.Run(name, func(t *testing.T) {
			if len(cmd) < 2 || cmd[1] != "controller" {
				t.Fatalf("command %v", cmd)
			}
			args := make([]string, 0, len(cmd))
			for _, a := range cmd[2:] {
				// What the kubelet and systemd substitute.
				a = strings.NewReplacer("$(NODE_NAME)", "node-1", "%H", "host-1", "${REVGATE_PUBLISH_ADDRESS}", "").Replace(a)
				args = append(args, a)
			}
			o, err := parseController(t, args)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if o.Kubeconfig == "" || o.Render.Binary != "/usr/local/bin/revgate" {
				t.Fatalf("kubeconfig %q binary %q", o.Kubeconfig, o.Render.Binary)
			}
		})
	}
	// The kubeconfig the static pod names is mounted into it.
	mounted := false
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounted = mounted || m.MountPath == "/etc/kubernetes/revgate-controller.kubeconfig"
	}
	if !mounted {
		t.Fatal("the static pod does not mount its kubeconfig")
	}
}
