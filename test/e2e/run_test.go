package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runProc is a running `revgate run`.
type runProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	done chan error
}

func (p *runProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startRun(t *testing.T, args ...string) *runProc {
	t.Helper()
	return startRunCmd(t, exec.Command(revgateBin, append([]string{"run"}, args...)...))
}

// startRunCmd starts cmd, a `revgate run` command line of any binary and
// working folder.
func startRunCmd(t *testing.T, cmd *exec.Cmd) *runProc {
	t.Helper()
	p := &runProc{done: make(chan error, 1), cmd: cmd}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(copied)
	}()
	go func() { <-copied; p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("revgate run output:\n%s", p.output())
		}
	})
	return p
}

// interrupt sends SIGINT, as Ctrl-C does, and waits for a clean exit.
func (p *runProc) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("revgate run after Ctrl-C: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("revgate run did not stop within 90s of Ctrl-C")
	}
}

// TestRun drives `revgate run`: it installs revision 1, serves it, prints
// the commands to go on with, stops cleanly on Ctrl-C, and resumes without
// reinstalling.
func TestRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := startUpstream(t, "v1")
	src := source(false, up.addr).Write(t)
	root := filepath.Join(e.root, "run")
	args := []string{
		"--root=" + root, "--source=" + src,
		"--http-addr=" + e.httpAddr, "--https-addr=" + e.httpsAddr, "--admin-addr=" + e.adminAddr,
		"--demo=false", "--fallback-timeout=" + fallbackTimeout.String(),
	}
	for _, a := range e.superviseArgs {
		args = append(args, "--supervise-arg="+a)
	}
	e.layout.ResourceDir = filepath.Join(root, "resources")
	e.layout.ManifestsDir = filepath.Join(root, "manifests")

	p := startRun(t, args...)
	waitFor(t, waitLong, "revgate run to print its banner", func() (bool, string) {
		return strings.Contains(p.output(), "Ctrl-C stops everything"), ""
	})
	e.waitGood(1, "v1")
	out := p.output()
	for _, want := range []string{
		"http://" + e.httpAddr,
		"http://" + e.adminAddr,
		" install --source-dir " + src,
		"--resource-dir=" + e.layout.ResourceDir,
		"--manifests-dir=" + e.layout.ManifestsDir,
		" status ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("banner lacks %q", want)
		}
	}
	// A second run on the same addresses would share the ports with the
	// first one through SO_REUSEPORT; it must refuse instead.
	second, err := revgate(t, append([]string{"run"}, args...)...)
	if err == nil || !strings.Contains(second, "already served") {
		t.Errorf("a second revgate run on busy addresses: %v\n%s", err, second)
	}

	p.interrupt(t)
	waitNoProcesses(t, root, 10*time.Second)

	p = startRun(t, args...)
	waitFor(t, waitLong, "revgate run to resume", func() (bool, string) {
		return strings.Contains(p.output(), "Ctrl-C stops everything"), ""
	})
	if !strings.Contains(p.output(), "resuming") {
		t.Errorf("second run did not resume:\n%s", p.output())
	}
	e.waitGood(1, "v1")
	entries, err := os.ReadDir(e.layout.ResourceDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range entries {
		if strings.HasPrefix(d.Name(), "revgate-pod-") && d.Name() != "revgate-pod-1" {
			t.Errorf("resumed run installed %s", d.Name())
		}
	}
	p.interrupt(t)
}

// TestRunFromEmptyFolder installs revgate into an empty GOPATH as a user
// would, and runs the installed binary in an empty folder beside other
// servers: with no ./examples it serves the example configuration built into
// the binary, with its own gateway, admin and demo ports. Before, `revgate
// run` outside the repository failed with "open examples: no such file or
// directory".
//
// The GOPATH is new and empty; the module cache is the one the build already
// filled (GOMODCACHE), and GOPROXY=off proves nothing is downloaded.
func TestRunFromEmptyFolder(t *testing.T) {
	t.Parallel()
	gopath := t.TempDir()
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	install := exec.Command("go", "install", "./cmd/revgate")
	install.Dir = filepath.Join("..", "..")
	install.Env = append(os.Environ(), "GOPATH="+gopath, "GOBIN=", "GOMODCACHE="+strings.TrimSpace(string(modcache)),
		"GOPROXY=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	bin := filepath.Join(gopath, "bin", "revgate")

	dir := t.TempDir()
	httpAddr, httpsAddr, adminAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	var demoPorts []string
	for range 2 {
		_, port, _ := net.SplitHostPort(freeAddr(t))
		demoPorts = append(demoPorts, port)
	}
	cmd := exec.Command(bin, "run", "--http-addr="+httpAddr, "--https-addr="+httpsAddr, "--admin-addr="+adminAddr,
		"--demo-ports="+strings.Join(demoPorts, ","), "--supervise-arg=--relist-period=1s")
	cmd.Dir = dir
	p := startRunCmd(t, cmd)
	waitFor(t, waitLong, "revgate run to print its banner", func() (bool, string) {
		return strings.Contains(p.output(), "Ctrl-C stops everything"), ""
	})
	if out := p.output(); !strings.Contains(out, "revgate is running (ready)") || !strings.Contains(out, "install --source-dir .run/examples") {
		t.Errorf("banner:\n%s", out)
	}
	// The storefront Ingress sends / to upstream-1 and /v2/ to upstream-2;
	// shop.localhost's /team goes through the delegated IngressRoute.
	for _, c := range []struct{ host, path, want string }{
		{"localhost", "/", "upstream-1 GET /"},
		{"localhost", "/v2/x", "upstream-2 GET /v2/x"},
		{"shop.localhost", "/team", "upstream-2 GET /team"},
	} {
		waitFor(t, 30*time.Second, "GET "+c.host+c.path, func() (bool, string) {
			r := getHost("http://"+httpAddr+c.path, c.host)
			return r.err == nil && r.status == http.StatusOK && strings.TrimSpace(r.body) == c.want,
				r.body
		})
	}
	for _, f := range []string{".run/examples/20-ingress.yaml", ".run/resources/revgate-pod-1/configmaps/config/20-ingress.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	p.interrupt(t)
	waitNoProcesses(t, dir, 10*time.Second)
}
