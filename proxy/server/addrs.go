package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// ListenerFlags are the listener addresses of `revgate proxy`, as its flags
// --http-addr, --https-addr and --admin-addr give them (internal/cmdline
// registers those), checked alike by the proxy, `revgate validate` and the
// commands that render a proxy pod.
type ListenerFlags struct {
	// HTTP, HTTPS and Admin are --http-addr, --https-addr and --admin-addr.
	HTTP, HTTPS, Admin string
}

// Validate reports listeners that would share a socket address. With
// SO_REUSEPORT two listeners of one process bind the same port silently and
// the kernel spreads connections over both, so traffic and admin answers
// would mix: it is a configuration error, not something to discover in
// production. Addresses overlap when their ports are equal (and not 0) and
// their hosts are equal, resolve to a common address, or one of them is
// unspecified (all addresses).
func (l ListenerFlags) Validate() error {
	type named struct{ flag, addr string }
	list := []named{{"--http-addr", l.HTTP}, {"--https-addr", l.HTTPS}, {"--admin-addr", l.Admin}}
	var errs []error
	parsed := make([]*listenAddr, len(list))
	for i, n := range list {
		if n.addr == "" {
			continue
		}
		a, err := parseListenAddr(n.addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid %s %q: %w", n.flag, n.addr, err))
			continue
		}
		parsed[i] = a
	}
	for i := range list {
		for j := i + 1; j < len(list); j++ {
			a, b := parsed[i], parsed[j]
			if a == nil || b == nil || a.port == 0 || a.port != b.port || !a.overlaps(b) {
				continue
			}
			errs = append(errs, fmt.Errorf("%s %q and %s %q are the same listening address (port %d): each listener needs its own",
				list[i].flag, list[i].addr, list[j].flag, list[j].addr, a.port))
		}
	}
	return errors.Join(errs...)
}

type listenAddr struct {
	host string
	ips  []net.IP // nil for a name that does not resolve
	any  bool     // unspecified host: every address
	port int
}

func parseListenAddr(s string) (*listenAddr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, err
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil {
		return nil, err
	}
	a := &listenAddr{host: strings.ToLower(host), port: p}
	if host == "" {
		a.any = true
		return a, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		a.ips, a.any = []net.IP{ip}, ip.IsUnspecified()
		return a, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ips, err := net.DefaultResolver.LookupIPAddr(ctx, host); err == nil {
		for _, ip := range ips {
			a.ips = append(a.ips, ip.IP)
		}
	}
	return a, nil
}

func (a *listenAddr) overlaps(b *listenAddr) bool {
	if a.any || b.any || a.host == b.host {
		return true
	}
	for _, x := range a.ips {
		for _, y := range b.ips {
			if x.Equal(y) {
				return true
			}
		}
	}
	return false
}
