// Package testcert makes self-signed certificates for tests and for the
// local servers tests start (the kube-apiserver of internal/kubetest). They
// are valid from an hour ago for a day and sign themselves, so a client can
// trust one by putting it in its root pool.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"
)

// PEM returns a certificate for hosts (DNS names, wildcards or IP
// addresses; the first is the common name) and its ECDSA key, in PEM.
func PEM(hosts ...string) (certPEM, keyPEM []byte, err error) {
	return PEMValid(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), hosts...)
}

// PEMValid is PEM with the given validity period.
func PEMValid(notBefore, notAfter time.Time, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("testcert: no host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0]},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

// MustPEM is PEM for tests: it fails t on an error.
func MustPEM(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	c, k, err := PEM(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TLS returns a certificate for hosts as a tls.Certificate with its Leaf.
func TLS(t testing.TB, hosts ...string) *tls.Certificate {
	t.Helper()
	c, k := MustPEM(t, hosts...)
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}
