package e2e

import (
	"bufio"
	"io"
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
	p := &runProc{done: make(chan error, 1)}
	p.cmd = exec.Command(revgateBin, append([]string{"run"}, args...)...)
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
		"--http-addr=" + e.httpAddr, "--admin-addr=" + e.adminAddr,
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
