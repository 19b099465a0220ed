package supervise

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fdInode returns the socket inode behind a net.Conn or net.Listener.
func fdInode(t *testing.T, c syscall.Conn) uint64 {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var inode uint64
	if err := raw.Control(func(fd uintptr) {
		target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil {
			t.Fatal(err)
		}
		inode, err = strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]"), 10, 64)
		if err != nil {
			t.Fatalf("fd target %q: %v", target, err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return inode
}

func TestSocketLookups(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "::1"
			}
			ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer ln.Close()
			client, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			serverAddr := netip.MustParseAddrPort(ln.Addr().String())
			clientAddr := netip.MustParseAddrPort(client.LocalAddr().String())
			wantConn := fdInode(t, server.(*net.TCPConn))
			wantListener := fdInode(t, ln.(*net.TCPListener))

			var diag sockDiag
			s, err := diag.lookup(serverAddr, clientAddr)
			if err != nil {
				t.Fatalf("sock_diag lookup: %v", err)
			}
			if s.inode != wantConn || s.state == tcpListen || s.remote != clientAddr {
				t.Errorf("sock_diag lookup = %+v, want the accepted socket, inode %d", s, wantConn)
			}
			ls, err := diag.listeners(serverAddr.Port())
			if err != nil {
				t.Fatalf("sock_diag listeners: %v", err)
			}
			if len(ls) != 1 || ls[0].inode != wantListener {
				t.Errorf("sock_diag listeners = %+v, want one with inode %d", ls, wantListener)
			}

			// Both paths attribute the connection to this process's group
			// and not to another one.
			p := procFS{root: "/proc"}
			own, err := p.groupSocketInodes(syscall.Getpgrp())
			if err != nil {
				t.Fatal(err)
			}
			for name, a := range map[string]func(map[uint64]bool) (attribution, error){
				"sock_diag": func(in map[uint64]bool) (attribution, error) { return owner(in, s.inode), nil },
				"procfs":    func(in map[uint64]bool) (attribution, error) { return p.attributeProcNet(clientAddr, serverAddr, in) },
			} {
				if got, err := a(own); err != nil || got != answeredByGroup {
					t.Errorf("%s: own group = %s, %v; want %s", name, got, err, answeredByGroup)
				}
				if got, err := a(map[uint64]bool{}); err != nil || got != answeredByOther {
					t.Errorf("%s: other group = %s, %v; want %s", name, got, err, answeredByOther)
				}
			}
		})
	}
}
