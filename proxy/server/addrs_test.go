package server

import (
	"strings"
	"testing"
)

func TestListenerAddressConflicts(t *testing.T) {
	cases := []struct {
		name              string
		http, https, admn string
		conflict          string // "" when valid
	}{
		{"defaults", DefaultHTTPAddr, DefaultHTTPSAddr, DefaultAdminAddr, ""},
		{"same address", "127.0.0.1:9901", DefaultHTTPSAddr, "127.0.0.1:9901", "--http-addr \"127.0.0.1:9901\" and --admin-addr"},
		{"wildcard and loopback", ":9901", DefaultHTTPSAddr, "127.0.0.1:9901", "--http-addr \":9901\" and --admin-addr"},
		{"IPv6 wildcard", "[::]:8443", "127.0.0.1:8443", DefaultAdminAddr, "--http-addr \"[::]:8443\" and --https-addr"},
		{"0.0.0.0 and a host", DefaultHTTPAddr, "0.0.0.0:9901", "127.0.0.1:9901", "--https-addr \"0.0.0.0:9901\" and --admin-addr"},
		{"name resolving to the same address", "localhost:9901", DefaultHTTPSAddr, "127.0.0.1:9901", "--http-addr \"localhost:9901\" and --admin-addr"},
		{"service name port", "127.0.0.1:http", "127.0.0.1:80", DefaultAdminAddr, "port 80"},
		{"different hosts, one port", "127.0.0.2:9901", DefaultHTTPSAddr, "127.0.0.1:9901", ""},
		{"port 0 never conflicts", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""},
		{"disabled listener", "", DefaultHTTPSAddr, "", ""},
		{"not an address", "9901", DefaultHTTPSAddr, DefaultAdminAddr, "invalid --http-addr \"9901\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ListenerFlags{HTTP: c.http, HTTPS: c.https, Admin: c.admn}.Validate()
			if c.conflict == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.conflict) {
				t.Fatalf("error %v, want one naming %q", err, c.conflict)
			}
		})
	}
}
