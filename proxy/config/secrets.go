package config

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/proxy/model"
)

// secretProblem is why a TLS Secret does not validate, kept until it is
// known whether a route references the Secret.
type secretProblem struct {
	o          *object
	field, msg string
	// referenced is set once a route asked for the Secret.
	referenced bool
}

// isTLSSecret reports whether a Secret is validated as a TLS key pair: its
// type is kubernetes.io/tls, or it has no type (a secrets/<name>/ folder of a
// revision, which carries only keys) and holds tls.crt or tls.key. Any other
// Secret (Opaque credentials, tokens, ...) is carried into the revision for
// whoever reads it and left alone.
func isTLSSecret(typ corev1.SecretType, data map[string][]byte) bool {
	if typ == corev1.SecretTypeTLS {
		return true
	}
	if typ != "" {
		return false
	}
	_, crt := data[corev1.TLSCertKey]
	_, key := data[corev1.TLSPrivateKeyKey]
	return crt || key
}

// secretType is the type the API server gives a Secret without one.
func secretType(t corev1.SecretType) corev1.SecretType {
	if t == "" {
		return corev1.SecretTypeOpaque
	}
	return t
}

// referenceSecret records that a route needs the Secret ref: when it failed
// validation, that failure becomes an error of the Secret (refusing an
// install, excluding the referring objects).
func (t *translator) referenceSecret(ref model.ObjectRef) {
	p := t.badSecrets[ref]
	if p == nil || p.referenced {
		return
	}
	p.referenced = true
	t.errorf(p.o, p.field, "%s", p.msg)
}

// unreferencedSecrets reports the TLS Secrets that failed validation and
// that no route references: a warning, the Secret being served to nobody.
func (t *translator) unreferencedSecrets() {
	for _, ref := range sortedRefs(t.badSecrets) {
		p := t.badSecrets[ref]
		if p.referenced {
			continue
		}
		t.warnf(p.o, p.field, "%s; no route references this Secret, so it is not used", p.msg)
		t.out.ignored[ref] = "not a usable TLS Secret (" + p.field + ": " + p.msg + ") and referenced by no route"
	}
}
