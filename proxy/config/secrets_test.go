package config

import (
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

// Secrets are not all TLS: an install carrying secrets/creds/token was
// refused with "data[tls.crt]: missing certificate". A Secret is judged as
// TLS only when it says so (type kubernetes.io/tls) or, in a revision's
// secrets/<name>/ folder that carries no type, holds tls.crt or tls.key; a
// broken one is an error only once a route references it.
func TestSecretsAreNotAllTLS(t *testing.T) {
	crt, key := genCert(t, "foo.com")
	tlsIngress := ingress("default", "ing", "foo.com", "Prefix / web 80") + "  tls:\n  - secretName: s\n"
	root := func(secret string) string {
		return "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: root\n  namespace: default\nspec:\n  virtualhost:\n    fqdn: foo.com\n    tls:\n      secretName: " + secret + "\n  routes:\n  - match: /\n    services:\n    - name: web\n      port: 80\n"
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		// wantErr and wantWarn are "field: message" of a problem on Secret s.
		wantErr, wantWarn string
		status            model.Status
		// ingressStatus is checked when an Ingress or IngressRoute is present.
		served model.Status
	}{
		{
			name:   "opaque folder",
			files:  map[string]string{"secrets/s/token": "t0ken", "secrets/s/user": "me"},
			status: model.StatusIgnored,
		},
		{
			name:   "opaque folder beside a good TLS secret in use",
			files:  map[string]string{"secrets/creds/token": "t0ken", "secrets/s/tls.crt": crt, "secrets/s/tls.key": key, "configmaps/gw/ing.yaml": webSvc + "---\n" + tlsIngress},
			status: model.StatusValid, served: model.StatusValid,
		},
		{
			name:     "broken folder secret no route uses",
			files:    map[string]string{"secrets/s/tls.crt": crt},
			wantWarn: "data[tls.key]: missing private key; no route references",
			status:   model.StatusIgnored,
		},
		{
			name:    "broken folder secret an Ingress uses",
			files:   map[string]string{"secrets/s/tls.crt": crt, "configmaps/gw/ing.yaml": webSvc + "---\n" + tlsIngress},
			wantErr: "data[tls.key]: missing private key",
			status:  model.StatusInvalid, served: model.StatusExcluded,
		},
		{
			name:    "broken folder secret an IngressRoute root uses",
			files:   map[string]string{"secrets/s/tls.crt": crt, "secrets/s/tls.key": "garbage", "configmaps/gw/ir.yaml": webSvc + "---\n" + root("s")},
			wantErr: "data[tls.crt]: invalid key pair",
			status:  model.StatusInvalid, served: model.StatusExcluded,
		},
		{
			name:     "broken typed secret no route uses",
			files:    map[string]string{"s.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ntype: kubernetes.io/tls\nstringData:\n  tls.key: x\n"},
			wantWarn: "data[tls.crt]: missing certificate; no route references",
			status:   model.StatusIgnored,
		},
		{
			name:   "opaque typed secret with a tls.crt key",
			files:  map[string]string{"s.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ntype: Opaque\nstringData:\n  tls.crt: not a certificate\n"},
			status: model.StatusIgnored,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			snap, err := Build(Options{Dirs: []string{dir}})
			if err != nil {
				t.Fatal(err)
			}
			var errs, warns []string
			for _, p := range problemsOf(snap, "Secret", "s") {
				s := p.Field + ": " + p.Message
				if p.Severity == model.SeverityError {
					errs = append(errs, s)
				} else {
					warns = append(warns, s)
				}
			}
			if len(snap.Errors()) != len(errs) {
				t.Errorf("errors on other objects:\n%s", dumpProblems(snap))
			}
			check := func(kind string, got []string, want string) {
				if want == "" && len(got) > 0 || want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], want)) {
					t.Errorf("%s on the Secret: %q, want %q", kind, got, want)
				}
			}
			check("errors", errs, tc.wantErr)
			check("warnings", warns, tc.wantWarn)
			if s := statusOf(snap, "Secret", "s"); s.Status != tc.status {
				t.Errorf("secret status %+v, want %s", s, tc.status)
			}
			if tc.served != "" {
				st := statusOf(snap, "Ingress", "ing")
				if st.Object.Kind == "" {
					st = statusOf(snap, "IngressRoute", "root")
				}
				if st.Status != tc.served {
					t.Errorf("referring object %+v, want %s", st, tc.served)
				}
			}
		})
	}
}
