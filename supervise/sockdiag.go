package supervise

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sizes and offsets of the sock_diag structures (linux/inet_diag.h), a
// stable kernel ABI: inet_diag_req_v2 is 56 bytes, inet_diag_msg 72, and an
// inet_diag_sockid (48 bytes) sits at offset 8 of the request and 4 of the
// message.
const (
	inetDiagReqV2Size = 56
	inetDiagMsgSize   = 72
	inetDiagNoCookie  = ^uint32(0)
	tcpfListen        = 1 << tcpListen
	tcpfAll           = ^uint32(0)
)

// errDiagNotFound is the kernel's answer for a socket that does not exist.
var errDiagNotFound = errors.New("no such socket")

// diagSocket is the part of an inet_diag_msg the probes need.
type diagSocket struct {
	local, remote netip.AddrPort
	state         uint8
	inode         uint64
}

// sockDiag asks the kernel for TCP sockets over NETLINK_SOCK_DIAG. Unlike
// /proc/net/tcp, whose text grows with every TIME_WAIT socket of the host
// (tens of thousands on a busy one), it looks one connection up by its
// addresses, and dumps only the listening table.
type sockDiag struct{}

// lookup returns the socket whose local address is local and remote address
// is remote. The kernel falls back to a listener on local when there is no
// such connection; callers check the state.
func (sockDiag) lookup(local, remote netip.AddrPort) (diagSocket, error) {
	family := uint8(unix.AF_INET)
	if local.Addr().Is6() {
		family = unix.AF_INET6
	}
	req := diagRequest(family, tcpfAll, local, remote)
	socks, err := diagExchange(req, unix.NLM_F_REQUEST)
	if err != nil {
		return diagSocket{}, err
	}
	if len(socks) == 0 {
		return diagSocket{}, errDiagNotFound
	}
	return socks[0], nil
}

// listeners returns the listening TCP sockets on port, of both families.
func (sockDiag) listeners(port uint16) ([]diagSocket, error) {
	var out []diagSocket
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		any := netip.IPv4Unspecified()
		if family == unix.AF_INET6 {
			any = netip.IPv6Unspecified()
		}
		req := diagRequest(family, tcpfListen, netip.AddrPortFrom(any, port), netip.AddrPortFrom(any, 0))
		socks, err := diagExchange(req, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
		if err != nil {
			return nil, err
		}
		for _, s := range socks {
			if s.local.Port() == port && s.state == tcpListen {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// diagRequest builds a netlink message holding an inet_diag_req_v2.
func diagRequest(family uint8, states uint32, local, remote netip.AddrPort) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+inetDiagReqV2Size)
	r := b[unix.NLMSG_HDRLEN:]
	r[0] = family
	r[1] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], states)
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	putDiagAddr(id[4:20], local.Addr())
	putDiagAddr(id[20:36], remote.Addr())
	binary.NativeEndian.PutUint32(id[40:], inetDiagNoCookie)
	binary.NativeEndian.PutUint32(id[44:], inetDiagNoCookie)
	return b
}

func putDiagAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
		return
	}
	v := a.As16()
	copy(dst, v[:])
}

func diagAddr(src []byte, family uint8, port uint16) netip.AddrPort {
	if family == unix.AF_INET {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(src[:4])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(src[:16])).Unmap(), port)
}

// diagExchange sends one request and collects the inet_diag_msg answers.
func diagExchange(req []byte, flags uint16) ([]diagSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("open sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	const seq = 1
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], flags)
	binary.NativeEndian.PutUint32(req[8:], seq)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("send sock_diag request: %w", err)
	}
	var out []diagSocket
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("read sock_diag answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("parse sock_diag answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("short sock_diag error")
				}
				code := -int32(binary.NativeEndian.Uint32(m.Data))
				if code == 0 {
					return out, nil
				}
				if syscall.Errno(code) == syscall.ENOENT {
					return nil, errDiagNotFound
				}
				return nil, fmt.Errorf("sock_diag: %w", syscall.Errno(code))
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(m.Data) < inetDiagMsgSize {
					return nil, errors.New("short inet_diag_msg")
				}
				d := m.Data
				family := d[0]
				id := d[4:52]
				out = append(out, diagSocket{
					state:  d[1],
					local:  diagAddr(id[4:20], family, binary.BigEndian.Uint16(id[0:])),
					remote: diagAddr(id[20:36], family, binary.BigEndian.Uint16(id[2:])),
					inode:  uint64(binary.NativeEndian.Uint32(d[68:])),
				})
				if flags&unix.NLM_F_DUMP == 0 {
					return out, nil
				}
			}
		}
	}
}
