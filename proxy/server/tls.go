package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
)

// errNoCertificate fails a handshake whose server name has no certificate.
var errNoCertificate = errors.New("no certificate for server name")

// certStore selects a per-certificate tls.Config by SNI: exact name, then a
// wildcard matching one label; without SNI only a sole certificate is served.
type certStore struct {
	exact    map[string]*tls.Config
	wildcard map[string]*tls.Config
	sole     *tls.Config
	count    int
}

// minTLSVersion applies the floor: TLS 1.2 unless 1.1 was asked for.
func minTLSVersion(v uint16) uint16 {
	if v == tls.VersionTLS11 || v >= tls.VersionTLS12 {
		return v
	}
	return tls.VersionTLS12
}

// newCertStore indexes certificates. Unusable entries are skipped and
// reported in the returned error (the certificates check shows it).
func newCertStore(certs []model.Certificate) (*certStore, error) {
	s := &certStore{exact: map[string]*tls.Config{}, wildcard: map[string]*tls.Config{}}
	var errs []error
	for _, c := range certs {
		if c.Certificate == nil {
			errs = append(errs, fmt.Errorf("certificate from %s for %v has no key pair", c.Secret, c.Hosts))
			continue
		}
		cfg := &tls.Config{
			Certificates: []tls.Certificate{*c.Certificate},
			MinVersion:   minTLSVersion(c.MinVersion),
			NextProtos:   []string{"h2", "http/1.1"},
		}
		s.count++
		s.sole = cfg
		for _, h := range c.Hosts {
			h = strings.ToLower(h)
			if rest, ok := strings.CutPrefix(h, "*."); ok {
				if _, dup := s.wildcard[rest]; !dup {
					s.wildcard[rest] = cfg
				}
				continue
			}
			if _, dup := s.exact[h]; !dup {
				s.exact[h] = cfg
			}
		}
	}
	if s.count != 1 {
		s.sole = nil
	}
	return s, errors.Join(errs...)
}

// configFor returns the config for a server name.
func (s *certStore) configFor(serverName string) (*tls.Config, error) {
	name := route.NormalizeHost(serverName)
	if name == "" {
		if s.sole != nil {
			return s.sole, nil
		}
		return nil, fmt.Errorf("%w: client sent no server name and %d certificates are loaded", errNoCertificate, s.count)
	}
	if c := s.exact[name]; c != nil {
		return c, nil
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		if c := s.wildcard[name[i+1:]]; c != nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w %q", errNoCertificate, name)
}

// tlsConfig is the listener's config: it only chooses per-name configs.
func (s *certStore) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			return s.configFor(hello.ServerName)
		},
	}
}
