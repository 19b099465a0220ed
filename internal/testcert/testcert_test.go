package testcert

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestCertificateVerifiesForItsHosts(t *testing.T) {
	cert := TLS(t, "a.test", "*.wild.test", "127.0.0.1")
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	for _, name := range []string{"a.test", "x.wild.test", "127.0.0.1"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: "b.test", Roots: roots}); err == nil {
		t.Error("verified for a host it does not name")
	}
	expired, _, err := PEMValid(time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), "a.test")
	if err != nil || len(expired) == 0 {
		t.Fatalf("PEMValid: %v", err)
	}
}
