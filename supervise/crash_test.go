package supervise

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/internal/sdnotify/sdnotifytest"
)

// startSupervisorProcess runs a supervisor in a child process on dir.
func startSupervisorProcess(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{"SUPERVISE_HELPER=supervisor", "HELPER_MANIFESTS=" + dir, "PATH=" + os.Getenv("PATH")}
	w := &syncWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// startedPIDs returns the pids the helpers recorded in a starts file.
func startedPIDs(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, line := range starts(t, path) {
		_, p, _ := strings.Cut(line, "_")
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("starts line %q: %v", line, err)
		}
		pids = append(pids, n)
	}
	return pids
}

func TestSIGKILLedSupervisorTakesItsPodsAlongAndRestartsThem(t *testing.T) {
	dir, tmp := t.TempDir(), t.TempDir()
	startsFile := filepath.Join(tmp, "starts")
	writeManifest(t, dir, "p.yaml", helperPod(t, "p", map[string]string{"HELPER_ID": "p", "HELPER_STARTS": startsFile}))

	sup := startSupervisorProcess(t, dir)
	waitFor(t, "the pod to start", func() bool { return len(startedPIDs(t, startsFile)) == 1 })
	first := startedPIDs(t, startsFile)[0]
	if err := sup.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = sup.Wait()
	waitFor(t, "the orphaned pod process to die with its supervisor", func() bool { return !alive(first) })

	sup = startSupervisorProcess(t, dir)
	waitFor(t, "the restarted supervisor to start the pod again", func() bool { return len(startedPIDs(t, startsFile)) == 2 })
	second := startedPIDs(t, startsFile)[1]
	if !alive(second) {
		t.Fatalf("pod process %d of the restarted supervisor is not running", second)
	}
	if err := sup.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := sup.Wait(); err != nil {
		t.Errorf("supervisor exit after SIGTERM: %v, want status 0", err)
	}
	if alive(second) {
		t.Errorf("pod process %d outlived the supervisor's SIGTERM shutdown", second)
	}
}

func TestSystemdNotifications(t *testing.T) {
	sock := sdnotifytest.Listen(t, 200*time.Millisecond)
	n, watchdog, ok, err := Systemd()
	if err != nil || !ok || watchdog != 100*time.Millisecond {
		t.Fatalf("Systemd() = ok %v, watchdog %s, err %v; want ok, 100ms", ok, watchdog, err)
	}
	dir := t.TempDir()
	writeManifest(t, dir, "a.yaml", helperPod(t, "a", map[string]string{"HELPER_ID": "a"}))
	opts := fastOptions(t, dir)
	opts.Notifier, opts.WatchdogInterval = n, watchdog
	r := startSupervisor(t, New(opts))

	seen := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	read := func(want string) {
		t.Helper()
		for !seen[want] {
			msg := sock.Read(t, deadline)
			if strings.HasPrefix(msg, "STATUS=") {
				msg = "STATUS="
			}
			seen[msg] = true
		}
	}
	read("READY=1")
	read("STATUS=")
	read("WATCHDOG=1")
	go r.stop(t)
	read("STOPPING=1")
}

func TestProbeHandlers(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/redirect":
			w.WriteHeader(http.StatusFound)
		case "/header":
			if r.Header.Get("X-Probe") != "yes" || r.Host != "gateway.example" {
				w.WriteHeader(http.StatusBadRequest)
			}
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(handler)
	secure.TLS = &tls.Config{}
	secure.StartTLS()
	defer secure.Close()
	port := func(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }
	closedPort := freePort(t)
	container := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port(plain))}}}
	httpGet := func(path string, p intstr.IntOrString) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: p}}
	}

	tests := []struct {
		name    string
		handler corev1.ProbeHandler
		want    probeOutcome
	}{
		{"http 200", httpGet("/ok", intstr.FromInt(port(plain))), probeSuccess},
		{"http 302 counts as success", httpGet("/redirect", intstr.FromInt(port(plain))), probeSuccess},
		{"http 500", httpGet("/fail", intstr.FromInt(port(plain))), probeFailure},
		{"http named port", httpGet("/ok", intstr.FromString("web")), probeSuccess},
		{"http unknown port name", httpGet("/ok", intstr.FromString("nope")), probeFailure},
		{"http headers and host", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/header", Port: intstr.FromInt(port(plain)),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}, {Name: "Host", Value: "gateway.example"}}}}, probeSuccess},
		{"http connection refused", httpGet("/ok", intstr.FromInt(closedPort)), probeFailure},
		{"https without verification", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(port(secure)), Scheme: corev1.URISchemeHTTPS}}, probeSuccess},
		{"https 500", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/x", Port: intstr.FromInt(port(secure)), Scheme: corev1.URISchemeHTTPS}}, probeFailure},
		{"tcp open", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(port(plain))}}, probeSuccess},
		{"tcp closed", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(closedPort)}}, probeFailure},
		{"exec exit 0", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, probeSuccess},
		{"exec exit 1", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, probeFailure},
		{"grpc unsupported", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port(plain))}}, probeFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &prober{probe: &corev1.Probe{ProbeHandler: tt.handler}, container: container, env: []string{"PATH=" + os.Getenv("PATH")}, proc: procFS{root: "/proc"}, clock: clock.RealClock{}}
			// The servers run in this process, so they answer for our own group.
			got, msg := p.check(context.Background(), syscall.Getpgrp())
			if got != tt.want {
				t.Errorf("outcome %s (%s), want %s", got, msg, tt.want)
			}
		})
	}
}
