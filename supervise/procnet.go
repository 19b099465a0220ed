package supervise

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = 0x0A

// sockEntry is one socket of /proc/net/tcp or /proc/net/tcp6.
type sockEntry struct {
	local, remote netip.AddrPort
	state         uint8
	inode         uint64
}

// procFS reads the parts of /proc the probes need, through
// prometheus/procfs; root is "/proc" outside tests.
type procFS struct{ root string }

// sockets returns the TCP sockets of the supervisor's network namespace.
func (p procFS) sockets() ([]sockEntry, error) {
	fs, err := procfs.NewFS(p.root)
	if err != nil {
		return nil, err
	}
	var out []sockEntry
	for _, table := range []struct {
		name string
		read func() (procfs.NetTCP, error)
	}{{"net/tcp", fs.NetTCP}, {"net/tcp6", fs.NetTCP6}} {
		lines, err := table.read()
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				continue // no IPv6
			}
			return nil, fmt.Errorf("read %s: %w", table.name, err)
		}
		for _, l := range lines {
			out = append(out, sockEntry{
				local:  addrPort(l.LocalAddr, l.LocalPort),
				remote: addrPort(l.RemAddr, l.RemPort),
				state:  uint8(l.St),
				inode:  l.Inode,
			})
		}
	}
	return out, nil
}

func addrPort(ip net.IP, port uint64) netip.AddrPort {
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), uint16(port))
}

// groupSocketInodes returns the inodes of the sockets open in any process of
// process group pgid.
func (p procFS) groupSocketInodes(pgid int) (map[uint64]bool, error) {
	fs, err := procfs.NewFS(p.root)
	if err != nil {
		return nil, err
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes in %s: %w", p.root, err)
	}
	inodes := map[uint64]bool{}
	for _, proc := range procs {
		if st, err := proc.Stat(); err != nil || st.PGRP != pgid {
			continue // exited meanwhile, or another group
		}
		targets, err := proc.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, target := range targets {
			rest, ok := strings.CutPrefix(target, "socket:[")
			if !ok {
				continue
			}
			if n, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

// attribution says which process answered a probe connection.
type attribution int

const (
	// answeredUnknown: the server side of the connection could not be found.
	answeredUnknown attribution = iota
	// answeredByGroup: the probed process group holds the server socket.
	answeredByGroup
	// answeredByOther: another process (an older one on the same port) answered.
	answeredByOther
)

func (a attribution) String() string {
	switch a {
	case answeredByGroup:
		return "probed process"
	case answeredByOther:
		return "another process"
	}
	return "unknown"
}

// attribute finds the process that holds the server side of the connection
// from client to server. With SO_REUSEPORT an old and a new process both
// listen on server, and the kernel hands each connection to one of them.
// The accepted socket is the one whose local address is server and remote
// address is client; its inode is among the socket fds of the process that
// accepted it. When it is not found (not accepted yet, or closed by the
// server), the answer is still attributed if every listener on the port
// belongs to the group. Sockets are looked up with sock_diag, or in
// /proc/net/tcp where netlink is not available.
func (p procFS) attribute(client, server netip.AddrPort, pgid int) (attribution, error) {
	inodes, err := p.groupSocketInodes(pgid)
	if err != nil {
		return answeredUnknown, err
	}
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())

	var diag sockDiag
	s, err := diag.lookup(server, client)
	switch {
	case err == nil && s.state != tcpListen && s.remote == client && s.inode != 0:
		return owner(inodes, s.inode), nil
	case err == nil || errors.Is(err, errDiagNotFound):
		ls, err := diag.listeners(server.Port())
		if err == nil {
			return listenersOwner(inodes, server, ls), nil
		}
	}
	return p.attributeProcNet(client, server, inodes)
}

func owner(inodes map[uint64]bool, inode uint64) attribution {
	if inodes[inode] {
		return answeredByGroup
	}
	return answeredByOther
}

// listenersOwner attributes a connection by the listeners on its port: to
// the group when every one of them is the group's.
func listenersOwner(inodes map[uint64]bool, server netip.AddrPort, ls []diagSocket) attribution {
	n := 0
	for _, l := range ls {
		if a := l.local.Addr().Unmap(); a != server.Addr() && !a.IsUnspecified() {
			continue
		}
		if !inodes[l.inode] {
			return answeredUnknown
		}
		n++
	}
	if n == 0 {
		return answeredUnknown
	}
	return answeredByGroup
}

// attributeProcNet is attribute over /proc/net/tcp and tcp6.
func (p procFS) attributeProcNet(client, server netip.AddrPort, inodes map[uint64]bool) (attribution, error) {
	socks, err := p.sockets()
	if err != nil {
		return answeredUnknown, err
	}
	var listeners []diagSocket
	for _, s := range socks {
		if s.local == server && s.remote == client && s.inode != 0 {
			return owner(inodes, s.inode), nil
		}
		if s.state == tcpListen && s.local.Port() == server.Port() {
			listeners = append(listeners, diagSocket{local: s.local, state: s.state, inode: s.inode})
		}
	}
	return listenersOwner(inodes, server, listeners), nil
}
