package supervise

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
)

// Probe defaults, as in Kubernetes.
const (
	defaultProbePeriod     = 10 * time.Second
	defaultProbeTimeout    = 1 * time.Second
	defaultProbeThresholds = 3
	// maxProbeAttempts bounds the connections one probe opens while the
	// answers come from another process sharing the port.
	maxProbeAttempts = 16
	// acceptPoll is how often a TCP probe looks for the server side of its
	// connection until the timeout.
	acceptPoll = 20 * time.Millisecond
)

// errAnsweredByOther marks a probe connection that another process accepted.
var errAnsweredByOther = errors.New("answer came from another process on the port")

// probeOutcome is the result of one probe.
type probeOutcome int

const (
	probeFailure probeOutcome = iota
	probeSuccess
	// probeUncounted: no answer could be attributed to the probed process;
	// the probe counts neither as success nor as failure.
	probeUncounted
)

func (o probeOutcome) String() string {
	switch o {
	case probeSuccess:
		return "success"
	case probeUncounted:
		return "uncounted"
	}
	return "failure"
}

// prober runs one container's probe against the process group of the
// container's current process.
type prober struct {
	probe     *corev1.Probe
	container *corev1.Container
	env       []string
	proc      procFS
	// clock paces the wait for an accepted socket to show up; the probe's
	// timeout is a deadline on its sockets and process, on the wall clock.
	clock clock.Clock
}

// period returns periodSeconds (default 10s).
func (p *prober) period() time.Duration {
	if p.probe.PeriodSeconds > 0 {
		return time.Duration(p.probe.PeriodSeconds) * time.Second
	}
	return defaultProbePeriod
}

// timeout returns timeoutSeconds (default 1s).
func (p *prober) timeout() time.Duration {
	if p.probe.TimeoutSeconds > 0 {
		return time.Duration(p.probe.TimeoutSeconds) * time.Second
	}
	return defaultProbeTimeout
}

// thresholds returns successThreshold (default 1) and failureThreshold (default 3).
func (p *prober) thresholds() (success, failure int) {
	success, failure = 1, defaultProbeThresholds
	if p.probe.SuccessThreshold > 0 {
		success = int(p.probe.SuccessThreshold)
	}
	if p.probe.FailureThreshold > 0 {
		failure = int(p.probe.FailureThreshold)
	}
	return success, failure
}

// check runs one probe against process group pgid. Network probes whose
// answer came from another process are retried on a new connection, up to
// maxProbeAttempts; when none could be attributed the outcome is uncounted.
func (p *prober) check(ctx context.Context, pgid int) (probeOutcome, string) {
	h := p.probe.ProbeHandler
	switch {
	case h.Exec != nil:
		return p.checkExec(ctx)
	case h.HTTPGet != nil, h.TCPSocket != nil:
	case h.GRPC != nil:
		return probeFailure, "grpc probes are not supported"
	default:
		return probeFailure, "probe has no handler"
	}
	// timeoutSeconds bounds the whole probe, retries included, so that a
	// busy host delays readiness but never stalls the probe loop.
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	var last string
	for range maxProbeAttempts {
		var err error
		if h.HTTPGet != nil {
			err = p.checkHTTP(ctx, pgid)
		} else {
			err = p.checkTCP(ctx, pgid)
		}
		switch {
		case err == nil:
			return probeSuccess, ""
		case parent.Err() != nil:
			return probeUncounted, "stopped"
		case errors.Is(err, errAnsweredByOther):
			last = err.Error()
			continue
		case last != "" && ctx.Err() != nil:
			// Out of time after answers from another process only.
			return probeUncounted, last
		default:
			return probeFailure, err.Error()
		}
	}
	return probeUncounted, last
}

// port resolves a probe port: a number, or the name of a container port.
func (p *prober) port(port intstr.IntOrString) (int, error) {
	if port.Type == intstr.String {
		for _, cp := range p.container.Ports {
			if cp.Name == port.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
		return 0, fmt.Errorf("no container port named %q", port.StrVal)
	}
	if port.IntVal <= 0 || port.IntVal > 65535 {
		return 0, fmt.Errorf("port %d out of range", port.IntVal)
	}
	return int(port.IntVal), nil
}

func hostOr(host string) string {
	if host == "" {
		return "127.0.0.1" // pods run here share the host network
	}
	return host
}

// dial opens a TCP connection for a probe, bounded by the probe timeout.
func (p *prober) dial(ctx context.Context, host string, port int) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("dial %s:%d: %w", host, port, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return conn, nil
}

// owner attributes the server side of conn; it must run while conn is open.
func (p *prober) owner(conn net.Conn, pgid int) (attribution, error) {
	local, err1 := netip.ParseAddrPort(conn.LocalAddr().String())
	remote, err2 := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err := errors.Join(err1, err2); err != nil {
		return answeredUnknown, fmt.Errorf("probe connection addresses: %w", err)
	}
	a, err := p.proc.attribute(local, remote, pgid)
	if err != nil {
		return answeredUnknown, fmt.Errorf("attribute probe connection: %w", err)
	}
	return a, nil
}

func (p *prober) checkTCP(ctx context.Context, pgid int) error {
	t := p.probe.TCPSocket
	port, err := p.port(t.Port)
	if err != nil {
		return err
	}
	conn, err := p.dial(ctx, hostOr(t.Host), port)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The accepted socket shows up once the server has accepted; give it
	// a moment within the timeout before giving up on attributing it.
	for {
		a, err := p.owner(conn, pgid)
		switch {
		case err != nil:
			return err
		case a == answeredByGroup:
			return nil
		case a == answeredByOther || ctx.Err() != nil:
			return fmt.Errorf("%w (%s)", errAnsweredByOther, a)
		}
		sleep(p.clock, acceptPoll, ctx.Done())
	}
}

func (p *prober) checkHTTP(ctx context.Context, pgid int) error {
	g := p.probe.HTTPGet
	port, err := p.port(g.Port)
	if err != nil {
		return err
	}
	host := hostOr(g.Host)
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" && scheme != "https" {
		return fmt.Errorf("unknown scheme %q", g.Scheme)
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path))
	if err != nil {
		return fmt.Errorf("probe url: %w", err)
	}
	raw, err := p.dial(ctx, host, port)
	if err != nil {
		return err
	}
	defer raw.Close()
	var conn net.Conn = raw
	if scheme == "https" {
		// Like the kubelet, probes do not verify certificates.
		tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: host}) //nolint:gosec // probe, as the kubelet does
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("tls handshake with %s: %w", u.Host, err)
		}
		conn = tc
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("probe request: %w", err)
	}
	req.Header.Set("User-Agent", "revgate-supervise-probe")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	// Keep-alive (no "Connection: close") so the server side is still open
	// when it is looked up below.
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("send probe to %s: %w", u, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Errorf("read probe answer from %s: %w", u, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if a, err := p.owner(raw, pgid); err != nil {
		return err
	} else if a != answeredByGroup {
		return fmt.Errorf("%w (%s)", errAnsweredByOther, a)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s answered %d", u, resp.StatusCode)
	}
	return nil
}

func (p *prober) checkExec(ctx context.Context) (probeOutcome, string) {
	cmdline := p.probe.Exec.Command
	if len(cmdline) == 0 {
		return probeFailure, "exec probe has no command"
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	cmd.Env = p.env
	cmd.Dir = p.container.WorkingDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return probeFailure, fmt.Sprintf("exec %s: %v: %s", cmdline[0], err, msg)
	}
	return probeSuccess, ""
}
