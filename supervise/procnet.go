package supervise

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = 0x0A

// sockEntry is one line of /proc/net/tcp or /proc/net/tcp6.
type sockEntry struct {
	local, remote netip.AddrPort
	state         uint8
	inode         uint64
}

// procFS reads the parts of /proc the probes need; root is "/proc" outside
// tests.
type procFS struct{ root string }

// sockets returns the TCP sockets of the supervisor's network namespace.
func (p procFS) sockets() ([]sockEntry, error) {
	var out []sockEntry
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		data, err := os.ReadFile(filepath.Join(p.root, name))
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		entries, err := parseProcNetTCP(data)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		out = append(out, entries...)
	}
	return out, nil
}

// parseProcNetTCP parses the table format shared by /proc/net/tcp and tcp6.
func parseProcNetTCP(data []byte) ([]sockEntry, error) {
	var out []sockEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		local, err := parseHexAddrPort(f[1])
		if err != nil {
			return nil, err
		}
		remote, err := parseHexAddrPort(f[2])
		if err != nil {
			return nil, err
		}
		st, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("state %q: %w", f[3], err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inode %q: %w", f[9], err)
		}
		out = append(out, sockEntry{local: local, remote: remote, state: uint8(st), inode: inode})
	}
	return out, sc.Err()
}

// parseHexAddrPort parses "0100007F:1F90": the address is printed as 32-bit
// words in host byte order, the port in network order.
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	addrHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	raw, err := hex.DecodeString(addrHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad hex", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad port: %w", s, err)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// groupSocketInodes returns the inodes of the sockets open in any process of
// process group pgid.
func (p procFS) groupSocketInodes(pgid int) (map[uint64]bool, error) {
	dirs, err := os.ReadDir(p.root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.root, err)
	}
	inodes := map[uint64]bool{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if g, err := p.pgrp(pid); err != nil || g != pgid {
			continue
		}
		fdDir := filepath.Join(p.root, d.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // exited meanwhile
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
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

// pgrp reads the process group of pid from /proc/<pid>/stat; the command
// name may hold spaces and parentheses, so fields are counted after the last ')'.
func (p procFS) pgrp(pid int) (int, error) {
	data, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 3 { // state ppid pgrp
		return 0, fmt.Errorf("stat of %d: short", pid)
	}
	return strconv.Atoi(f[2])
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
