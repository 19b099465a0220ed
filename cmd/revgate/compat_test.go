package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

// The startup monitor accepts library-go's startup-monitor flags where they
// mean what revgate's do, so an OpenShift-style command line runs unchanged.
func TestMonitorAcceptsLibraryGoFlags(t *testing.T) {
	o := &monitorOptions{}
	fs := pflag.NewFlagSet("monitor", pflag.ContinueOnError)
	o.AddFlags(fs)
	args := []string{"--revision=7", "--fallback-timeout-duration=33s", "--resource-dir=/etc/kubernetes/static-pod-resources",
		"--manifests-dir=/etc/kubernetes/manifests", "--target-name=kube-apiserver",
		"--installer-lock-file=/var/lock/kube-apiserver-installer-lock", "--node-name=master-0", "--kubeconfig=/k"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	want := revisions.Layout{Target: "kube-apiserver", ResourceDir: "/etc/kubernetes/static-pod-resources", ManifestsDir: "/etc/kubernetes/manifests",
		LockFile: "/var/lock/kube-apiserver-installer-lock", TerminationLog: "/var/log/kube-apiserver/termination.log"}
	if o.Revision != 7 || o.FallbackTimeout != 33*time.Second || o.layout != want || o.NodeName != "master-0" || o.Kubeconfig != "/k" {
		t.Fatalf("options %+v", o)
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Contains(help.String(), "fallback-timeout-duration") {
		t.Errorf("alias listed in --help:\n%s", help.String())
	}
	if err := fs.Parse([]string{"--log-file-path=/x"}); err == nil {
		t.Error("--log-file-path, which revgate has no counterpart of, was accepted")
	}
}

func TestInstallAcceptsLibraryGoFlags(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
		args          []string
		check         func(t *testing.T, o *installOptions)
	}{
		{
			name: "manifest dir and lock file",
			args: []string{"--source-dir=x", "--pod-manifest-dir=/etc/kubernetes/manifests", "--pod-manifests-lock-file=/var/lock/gw.lock", "--resource-dir=/res"},
			check: func(t *testing.T, o *installOptions) {
				if o.layout.ManifestsDir != "/etc/kubernetes/manifests" || o.layout.LockFile != "/var/lock/gw.lock" || o.layout.ResourceDir != "/res" {
					t.Fatalf("layout %+v", o.layout)
				}
			},
		},
		{name: "revisioned names without a revision", args: []string{"--namespace=n", "--configmaps=a", "--revisioned-names"}, wantErr: "--revisioned-names needs"},
		{name: "revisioned names from a folder", args: []string{"--source-dir=x", "--revision=3", "--revisioned-names"}, wantErr: "--revisioned-names needs"},
		{name: "pod is not an alias", args: []string{"--source-dir=x", "--pod=gw-pod"}, wantErr: "unknown flag: --pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &installOptions{}
			cmd := &cobra.Command{}
			o.AddFlags(cmd.Flags())
			err := cmd.Flags().Parse(tc.args)
			if err == nil {
				err = o.validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// --node-name defaults to $NODE_NAME, as library-go's installer pod reads
// the node from the downward API.
func TestNodeNameFromEnvironment(t *testing.T) {
	t.Setenv("NODE_NAME", "master-0")
	io := &installOptions{}
	io.AddFlags(pflag.NewFlagSet("install", pflag.ContinueOnError))
	mo := &monitorOptions{}
	mo.AddFlags(pflag.NewFlagSet("monitor", pflag.ContinueOnError))
	if io.NodeName != "master-0" || mo.NodeName != "master-0" {
		t.Fatalf("install %q, monitor %q, want master-0", io.NodeName, mo.NodeName)
	}
}

// TestInstallRevisionedNamesFromKubernetes installs revision 4 from the
// revisioned copies routes-4 and creds-4 of a real API server, with the
// library-go spellings of the manifests dir and lock file.
func TestInstallRevisionedNamesFromKubernetes(t *testing.T) {
	ctx := context.Background()
	client, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := "install-revisioned"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  ports:\n  - port: 80\n"
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "routes-4"}, Data: map[string]string{"web.yaml": svc}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds-4"}, Data: map[string][]byte{"token": []byte("four")}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	root := t.TempDir()
	l := revisions.Layout{Target: "ocp", ResourceDir: filepath.Join(root, "res"), ManifestsDir: filepath.Join(root, "man"), LockFile: filepath.Join(root, "ocp.lock")}.Defaulted()
	out, err := runCommand(t, "install", "--kubeconfig="+kubetest.Kubeconfig(t), "--namespace="+ns, "--configmaps=routes", "--secrets=creds",
		"--revision=4", "--revisioned-names", "--target=ocp", "--resource-dir="+l.ResourceDir,
		"--pod-manifest-dir="+l.ManifestsDir, "--pod-manifests-lock-file="+l.LockFile, "--node-name=master-0", "--binary=/usr/bin/revgate")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	want := installertest.Files{"configmaps/routes/web.yaml": []byte(svc), "secrets/creds/token": []byte("four")}
	if n, err := installertest.Check(l, want); err != nil || n != 4 {
		t.Fatalf("published %d: %v", n, err)
	}
}
