package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

func TestInstallFlags(t *testing.T) {
	cmd := newInstallCommand()
	defaults := map[string]string{
		"source-dir": "", "resource-dir": "/etc/kubernetes/static-pod-resources", "manifests-dir": "/etc/kubernetes/manifests",
		"lock-file": "", "target": "revgate", "revision": "0", "kubeconfig": "", "namespace": "",
		"configmaps": "[]", "secrets": "[]", "optional-configmaps": "[]", "optional-secrets": "[]",
		"termination-log": "", "binary": "", "image": "revgate:latest", "image-pull-policy": "IfNotPresent",
		"proxy-arg": "[]", "monitor-arg": "[]", "lock-timeout": "2m0s", "strict": "false", "no-publish": "false",
		"retry-timeout": "1m0s", "node-name": cmdline.DefaultNodeName(), "endpoints-file": "", "publish": "slots",
	}
	for name, def := range defaults {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			t.Errorf("flag --%s missing", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default %q, want %q", name, f.DefValue, def)
		}
	}
}

func TestInstallOptionsParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o *installOptions)
	}{
		{name: "no source", args: nil, wantErr: "no configuration source"},
		{name: "both sources", args: []string{"--source-dir=x", "--namespace=n", "--configmaps=a"}, wantErr: "cannot be combined"},
		{name: "kubeconfig for events only", args: []string{"--source-dir=x", "--kubeconfig=k"}, check: func(t *testing.T, o *installOptions) {
			if o.kubeSource() {
				t.Fatal("--kubeconfig alone chose the Kubernetes source")
			}
		}},
		{name: "no node name", args: []string{"--source-dir=x", "--kubeconfig=k", "--node-name="}, wantErr: "--node-name"},
		{name: "namespace without objects", args: []string{"--namespace=n"}, wantErr: "no objects to read"},
		{name: "kube without namespace", args: []string{"--configmaps=a"}, wantErr: "--namespace is required"},
		{name: "bad pull policy", args: []string{"--source-dir=x", "--image-pull-policy=Sometimes"}, wantErr: "Sometimes"},
		{name: "negative revision", args: []string{"--source-dir=x", "--revision=-1"}, wantErr: "invalid --revision"},
		{name: "bad target", args: []string{"--source-dir=x", "--target=Bad_Name"}, wantErr: "invalid target"},
		{
			name: "defaults follow the target", args: []string{"--source-dir=x", "--target=edge"},
			check: func(t *testing.T, o *installOptions) {
				if o.layout.LockFile != "/var/lock/edge-installer.lock" || o.layout.TerminationLog != "/var/log/edge/termination.log" {
					t.Fatalf("layout %+v", o.layout)
				}
				exe, _ := os.Executable()
				if o.render.Binary != exe || !filepath.IsAbs(o.render.Binary) {
					t.Fatalf("binary %q, want this executable %q", o.render.Binary, exe)
				}
			},
		},
		{
			name: "endpoints file made absolute", args: []string{"--source-dir=x", "--endpoints-file=res/revgate-live/endpoints.json"},
			check: func(t *testing.T, o *installOptions) {
				if !filepath.IsAbs(o.render.EndpointsFile) || !strings.HasSuffix(o.render.EndpointsFile, "/res/revgate-live/endpoints.json") {
					t.Fatalf("endpoints file %q not made absolute", o.render.EndpointsFile)
				}
			},
		},
		{
			name: "lists and repeated args",
			args: []string{"--namespace=n", "--configmaps=a,b", "--configmaps=c", "--optional-secrets=s",
				"--proxy-arg=--upstreams=a,b", "--proxy-arg=--x", "--monitor-arg=--timeout=1s", "--binary=bin/revgate"},
			check: func(t *testing.T, o *installOptions) {
				if !reflect.DeepEqual(o.ConfigMaps, []string{"a", "b", "c"}) || !reflect.DeepEqual(o.OptionalSecrets, []string{"s"}) {
					t.Fatalf("configmaps %v optional secrets %v", o.ConfigMaps, o.OptionalSecrets)
				}
				if !reflect.DeepEqual(o.render.ProxyArgs, []string{"--upstreams=a,b", "--x"}) || !reflect.DeepEqual(o.render.MonitorArgs, []string{"--timeout=1s"}) {
					t.Fatalf("proxy args %v monitor args %v", o.render.ProxyArgs, o.render.MonitorArgs)
				}
				if !filepath.IsAbs(o.render.Binary) || !strings.HasSuffix(o.render.Binary, "/bin/revgate") {
					t.Fatalf("binary %q not made absolute", o.render.Binary)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &installOptions{}
			cmd := &cobra.Command{}
			o.AddFlags(cmd.Flags())
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

// runCommand runs a fresh install or prune command with args (a fresh one, so
// that no flag value leaks from one run into the next) and returns its output.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmds := map[string]func() *cobra.Command{"install": newInstallCommand, "prune": newPruneCommand}
	cmd := cmds[args[0]]()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args[1:])
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func layoutArgs(l revisions.Layout) []string {
	return []string{"--target=" + l.Target, "--resource-dir=" + l.ResourceDir, "--manifests-dir=" + l.ManifestsDir, "--lock-file=" + l.LockFile}
}

// TestInstallAndPruneCommands installs through the command with the gateway's
// validator wired in: a configuration with an error is refused and nothing is
// written, a good one is installed and published, and prune keeps --keep.
func TestInstallAndPruneCommands(t *testing.T) {
	root := t.TempDir()
	l := revisions.Layout{
		Target: "gw", ResourceDir: filepath.Join(root, "res"), ManifestsDir: filepath.Join(root, "man"),
		LockFile: filepath.Join(root, "gw.lock"), TerminationLog: filepath.Join(root, "log", "termination.log"),
	}.Defaulted()

	// A broken TLS Secret that an Ingress uses.
	bad := installertest.SourceDir(t, map[string]string{"secrets/tls/tls.key": "not a key", "web.yaml": webTLSIngress("tls")})
	out, err := runCommand(t, append([]string{"install", "--source-dir=" + bad, "--termination-log=" + l.TerminationLog}, layoutArgs(l)...)...)
	if err == nil || !strings.Contains(err.Error(), "secrets/tls") {
		t.Fatalf("bad configuration: want a refusal naming secrets/tls, got %v\n%s", err, out)
	}
	if _, err := os.Stat(l.ResourceDir); !os.IsNotExist(err) {
		t.Fatalf("refused configuration wrote something: %v", err)
	}

	good := t.TempDir()
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  ports:\n  - port: 80\n"
	if err := os.WriteFile(filepath.Join(good, "web.yaml"), []byte(svc), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		out, err := runCommand(t, append([]string{"install", "--source-dir=" + good, "--termination-log=" + l.TerminationLog,
			"--binary=/usr/bin/revgate", "--proxy-arg=--fallback=backfill"}, layoutArgs(l)...)...)
		if err != nil {
			t.Fatalf("install %d: %v\n%s", i, err, out)
		}
		if !strings.Contains(out, fmt.Sprintf("revision %d published", i)) {
			t.Fatalf("install %d output: %s", i, out)
		}
	}
	n, err := installertest.Check(l, installertest.Files{"configmaps/config/web.yaml": []byte(svc)})
	if err != nil || n != 4 {
		t.Fatalf("published %d: %v", n, err)
	}
	pod, _ := os.ReadFile(l.PublishedPodManifest())
	for _, want := range []string{"- /usr/bin/revgate", "- --fallback=backfill", "- --termination-log=" + l.TerminationLog} {
		if !strings.Contains(string(pod), want) {
			t.Errorf("published manifest lacks %q", want)
		}
	}

	// No monitor judged them: revision 1 still serves in slot a, beside
	// revision 4 in slot b, and prune keeps it.
	out, err = runCommand(t, append([]string{"prune", "--keep=2"}, layoutArgs(l)...)...)
	if err != nil || strings.Contains(out, "removed revision 1") || !strings.Contains(out, "removed revision 2") {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	listing, err := l.List(revisions.OS())
	if err != nil || !reflect.DeepEqual(listing.Revisions, []int{1, 3, 4}) {
		t.Fatalf("after prune %v %v", listing.Revisions, err)
	}
}

// webTLSIngress is a Service and an Ingress terminating TLS with secret.
func webTLSIngress(secret string) string {
	return `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  ports:
  - port: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: default
spec:
  ingressClassName: revgate
  tls:
  - hosts: [web.example]
    secretName: ` + secret + `
  rules:
  - host: web.example
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
`
}

// Secrets are not all TLS. Opaque Secrets are installed (0600) and never
// refused; a TLS Secret that does not validate refuses the install only when
// a route uses it, and is a warning otherwise. Before, secrets/creds/token
// was refused with "data[tls.crt]: missing certificate".
func TestInstallSecretsAreNotAllTLS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		refused  string
		warning  string
		wantKeys []string
	}{
		{name: "opaque", files: map[string]string{"secrets/creds/token": "t0ken", "secrets/creds/user": "me"},
			wantKeys: []string{"secrets/creds/token", "secrets/creds/user"}},
		{name: "broken TLS no route uses", files: map[string]string{"secrets/tls/tls.crt": "not a certificate", "secrets/creds/token": "t0ken"},
			warning: "secrets/tls: Secret/default/tls: data[tls.key]: missing private key; no route references", wantKeys: []string{"secrets/tls/tls.crt", "secrets/creds/token"}},
		{name: "broken TLS an Ingress uses", files: map[string]string{"secrets/tls/tls.crt": "not a certificate", "secrets/tls/tls.key": "x", "web.yaml": webTLSIngress("tls")},
			refused: "secrets/tls: Secret/default/tls: data[tls.crt]: invalid key pair"},
		{name: "opaque Secret an Ingress uses for TLS", files: map[string]string{"secrets/creds/token": "t0ken", "web.yaml": webTLSIngress("creds")},
			refused: `Ingress/default/web: spec.tls[0].secretName: secret default/creds: secret of type "Opaque"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := revisions.Layout{Target: "gw", ResourceDir: filepath.Join(root, "res"), ManifestsDir: filepath.Join(root, "man"),
				LockFile: filepath.Join(root, "gw.lock"), TerminationLog: filepath.Join(root, "termination.log")}.Defaulted()
			out, err := runCommand(t, append([]string{"install", "--source-dir=" + installertest.SourceDir(t, tc.files), "--termination-log=" + l.TerminationLog,
				"--binary=/usr/bin/revgate"}, layoutArgs(l)...)...)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("want a refusal with %q, got %v\n%s", tc.refused, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			if tc.warning != "" && !strings.Contains(out, "warning: "+tc.warning) {
				t.Errorf("output lacks the warning %q:\n%s", tc.warning, out)
			}
			want := installertest.Files{}
			for rel, content := range tc.files {
				if strings.HasPrefix(rel, "secrets/") {
					want[rel] = []byte(content)
				}
			}
			// Check also proves every secret key is 0600.
			if n, err := installertest.Check(l, want); err != nil || n != 1 {
				t.Fatalf("published %d: %v", n, err)
			}
			for _, k := range tc.wantKeys {
				if _, ok := want[k]; !ok {
					t.Errorf("%s not installed", k)
				}
			}
		})
	}
}

func TestPruneFlags(t *testing.T) {
	cmd := newPruneCommand()
	for name, def := range map[string]string{"keep": "3", "target": "revgate", "resource-dir": "/etc/kubernetes/static-pod-resources",
		"manifests-dir": "/etc/kubernetes/manifests", "lock-file": "", "lock-timeout": "2m0s", "dry-run": "false"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.DefValue != def {
			t.Errorf("--%s: %+v, want default %q", name, f, def)
		}
	}
	o := &pruneOptions{}
	c := &cobra.Command{}
	o.addFlags(c)
	if err := c.Flags().Parse([]string{"--keep=-1"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--keep") {
		t.Fatalf("negative keep: %v", err)
	}
}

// TestInstallCommandFromKubernetes installs ConfigMaps and Secrets from a real
// API server through the command and finds the Event it recorded.
func TestInstallCommandFromKubernetes(t *testing.T) {
	ctx := context.Background()
	client, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := "install-command"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  ports:\n  - port: 80\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "routes"}, Data: map[string]string{"web.yaml": svc}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	root := t.TempDir()
	l := revisions.Layout{Target: "kgw", ResourceDir: filepath.Join(root, "res"), ManifestsDir: filepath.Join(root, "man"), LockFile: filepath.Join(root, "lock")}.Defaulted()
	out, err := runCommand(t, append([]string{"install", "--kubeconfig=" + kubetest.Kubeconfig(t), "--namespace=" + ns,
		"--configmaps=routes", "--optional-secrets=absent", "--node-name=node-a", "--binary=/usr/bin/revgate"}, layoutArgs(l)...)...)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if n, err := installertest.Check(l, installertest.Files{"configmaps/routes/web.yaml": []byte(svc)}); err != nil || n != 1 {
		t.Fatalf("published %d: %v", n, err)
	}
	evs, err := client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Reason == installer.EventRevisionInstalled && ev.InvolvedObject.Name == "kgw-node-a" {
			return
		}
	}
	t.Fatalf("no %s event on kgw-node-a among %d events", installer.EventRevisionInstalled, len(evs.Items))
}

// TestInstallSecretsFromKubernetes reads Secrets with client-go from a real
// API server: an Opaque Secret is installed 0600, a kubernetes.io/tls Secret
// whose key pair does not parse is a warning while no route uses it and
// refuses the install once one does.
func TestInstallSecretsFromKubernetes(t *testing.T) {
	ctx := context.Background()
	client, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := "install-secrets"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\nspec:\n  ports:\n  - port: 80\n"
	for _, obj := range []any{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: map[string]string{"web.yaml": svc}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tls-routes"}, Data: map[string]string{"web.yaml": webTLSIngress("tls")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"token": []byte("t0ken")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": []byte("not a certificate"), "tls.key": []byte("not a key")}},
	} {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = client.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, configMap string
		refused         string
	}{
		{name: "no route uses the broken Secret", configMap: "plain"},
		{name: "an Ingress uses it", configMap: "tls-routes", refused: "secrets/tls: Secret/default/tls: data[tls.crt]: invalid key pair"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := revisions.Layout{Target: "kgw", ResourceDir: filepath.Join(root, "res"), ManifestsDir: filepath.Join(root, "man"), LockFile: filepath.Join(root, "lock")}.Defaulted()
			out, err := runCommand(t, append([]string{"install", "--kubeconfig=" + kubetest.Kubeconfig(t), "--namespace=" + ns,
				"--configmaps=" + tc.configMap, "--secrets=creds,tls", "--node-name=node-a", "--binary=/usr/bin/revgate"}, layoutArgs(l)...)...)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("want a refusal with %q, got %v\n%s", tc.refused, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("install: %v\n%s", err, out)
			}
			if !strings.Contains(out, "warning: secrets/tls: Secret/default/tls: data[tls.crt]: invalid key pair") {
				t.Errorf("no warning about the broken Secret:\n%s", out)
			}
			want := installertest.Files{
				"configmaps/plain/web.yaml": []byte(svc),
				"secrets/creds/token":       []byte("t0ken"),
				"secrets/tls/tls.crt":       []byte("not a certificate"),
				"secrets/tls/tls.key":       []byte("not a key"),
			}
			if n, err := installertest.Check(l, want); err != nil || n != 1 {
				t.Fatalf("published %d: %v", n, err)
			}
		})
	}
}

func TestValidationOptionsFollowProxyArgs(t *testing.T) {
	for _, tt := range []struct {
		name              string
		args              []string
		wantClass, wantNS string
		wantFallback      string
	}{
		{"defaults", nil, "revgate", "default", "exclude"},
		{"proxy flags", []string{"--ingress-class=edge", "--namespace=gw", "--fallback=backfill", "--admin-address=127.0.0.1:1"}, "edge", "gw", "backfill"},
		{"bad value leaves the defaults", []string{"--ingress-class=edge", "--fallback=nonsense"}, "revgate", "default", "exclude"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := validationOptions(tt.args)
			if o.IngressClass != tt.wantClass || o.Namespace != tt.wantNS || string(o.Fallback) != tt.wantFallback || len(o.Dirs) != 0 {
				t.Fatalf("options %+v", o)
			}
		})
	}
}
