// Package crash drives the built revgate binary and kills it with SIGKILL at
// random points of an install, then checks that the disk holds the previous
// state or the complete new revision, and that the next install recovers.
package crash

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/internal/testcert"
	"github.com/revgate/revgate/revisions"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "revgate-crash-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "revgate")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	build := exec.Command("go", "build", "-o", binary, "./cmd/revgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build revgate: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeSource writes a valid gateway configuration of services Services (each
// padded to a few KiB) and one TLS Secret, and returns the folder and the files
// a revision of it holds.
func writeSource(t *testing.T, services int, tag string) (string, installertest.Files) {
	t.Helper()
	dir := t.TempDir()
	want := installertest.Files{}
	write := func(rel string, data []byte) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pad := bytes.Repeat([]byte("# padding to make the install take a while\n"), 80)
	for i := range services {
		svc := fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: default\n  labels:\n    source: \"%s\"\nspec:\n  ports:\n  - port: 80\n", i, tag)
		data := append([]byte(svc), pad...)
		rel := fmt.Sprintf("configmaps/services-%d/svc-%d.yaml", i%4, i)
		write(rel, data)
		want[rel] = data
	}
	crt, key := selfSigned(t)
	write("secrets/tls/tls.crt", crt)
	write("secrets/tls/tls.key", key)
	want["secrets/tls/tls.crt"], want["secrets/tls/tls.key"] = crt, key
	return dir, want
}

func selfSigned(t *testing.T) (crtPEM, keyPEM []byte) { return testcert.MustPEM(t, "example.test") }

func installCmd(l revisions.Layout, source string, stepDelay time.Duration) *exec.Cmd {
	cmd := exec.Command(binary, "install",
		"--source-dir="+source,
		"--target="+l.Target,
		"--resource-dir="+l.ResourceDir,
		"--manifests-dir="+l.ManifestsDir,
		"--lock-file="+l.LockFile,
		"--termination-log="+l.TerminationLog,
		"--lock-timeout=30s",
		"--binary=/usr/bin/revgate",
	)
	cmd.Env = append(os.Environ(), "REVGATE_TEST_INSTALL_STEP_DELAY="+stepDelay.String())
	return cmd
}

func install(t *testing.T, l revisions.Layout, source string) {
	t.Helper()
	if out, err := installCmd(l, source, 0).CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
}

func TestSIGKILLDuringInstall(t *testing.T) {
	const kills = 30
	stepDelay := 25 * time.Millisecond
	l := installertest.TempLayout(t)
	src, want := writeSource(t, 40, "a")
	install(t, l, src)
	if err := l.SetLastKnownGood(revisions.OS(), 1); err != nil {
		t.Fatal(err)
	}

	// Measure how long an install takes, to spread the kills over it.
	var total time.Duration
	for range 3 {
		start := time.Now()
		if out, err := installCmd(l, src, stepDelay).CombinedOutput(); err != nil {
			t.Fatalf("install: %v\n%s", err, out)
		}
		total += time.Since(start)
	}
	duration := total / 3
	t.Logf("an install takes about %v", duration)

	killed, leftTemps := 0, 0
	// On a loaded machine installs slow down: stop early once the budget is
	// spent, but never before minKills kills.
	const minKills, budget = 10, 25 * time.Second
	deadline := time.Now().Add(budget)
	runs := 0
	for i := range kills {
		if i >= minKills && time.Now().After(deadline) {
			break
		}
		runs++
		before, err := l.List(revisions.OS())
		if err != nil {
			t.Fatal(err)
		}
		delay, wasKilled := killSomewhereIn(t, installCmd(l, src, stepDelay), duration, fmt.Sprintf("kill %d: install", i))
		if wasKilled {
			killed++
		}
		if _, err := installertest.Check(l, want); err != nil {
			t.Fatalf("kill %d after %v: %v", i, delay, err)
		}
		// The serving slot (the last-known-good revision 1) is never
		// touched; the candidate beside it is the newest revision or, when
		// the kill fell between removing the old candidate and writing the
		// new one (remove, then write, so that a watcher sees a create),
		// absent until the next install.
		slots, err := l.PublishedSlots(revisions.OS())
		if err != nil {
			t.Fatal(err)
		}
		serving := revisions.ServingSlot(slots, 1)
		if serving == nil || serving.Revision != 1 {
			t.Fatalf("kill %d: serving slot %+v, want revision 1", i, serving)
		}
		for _, s := range slots {
			if s.Slot != serving.Slot && s.Revision < before.Highest() {
				t.Fatalf("kill %d: the candidate went back from revision %d to %d", i, before.Highest(), s.Revision)
			}
		}
		if checkNoTemps(l) != nil {
			leftTemps++
		}
		if n, err := l.LastKnownGood(revisions.OS()); err != nil || n != 1 {
			t.Fatalf("kill %d: last-known-good %d: %v", i, n, err)
		}
		// Recovery: the next install succeeds and publishes the highest revision.
		install(t, l, src)
		after, err := l.List(revisions.OS())
		if err != nil {
			t.Fatal(err)
		}
		published, err := installertest.Check(l, want)
		if err != nil || published != after.Highest() {
			t.Fatalf("kill %d: after recovery published %d of %d: %v", i, published, after.Highest(), err)
		}
		if err := checkNoTemps(l); err != nil {
			t.Fatalf("kill %d: after recovery: %v", i, err)
		}
	}
	t.Logf("%d of %d installs were killed before they finished, %d of them left temp files to clean up", killed, runs, leftTemps)
	if killed < runs/3 {
		t.Fatalf("only %d of %d kills landed inside an install: the test does not test much", killed, runs)
	}
}

func checkNoTemps(l revisions.Layout) error {
	for _, dir := range []string{l.ResourceDir, l.ManifestsDir} {
		es, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range es {
			if revisions.IsTempName(e.Name()) {
				return fmt.Errorf("temp %s left in %s", e.Name(), dir)
			}
		}
	}
	return nil
}

// TestRacingInstallProcesses runs installer processes with different sources
// at the same time: every revision is entirely one source's, revisions have no
// gaps and the highest is published.
func TestRacingInstallProcesses(t *testing.T) {
	const procs, rounds = 3, 4
	l := installertest.TempLayout(t)
	var sources []string
	var candidates []installertest.Files
	for p := range procs {
		src, want := writeSource(t, 8, strconv.Itoa(p))
		sources = append(sources, src)
		candidates = append(candidates, want)
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs*rounds)
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if out, err := installCmd(l, sources[p], 0).CombinedOutput(); err != nil {
					errs <- fmt.Errorf("install: %v\n%s", err, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	listing, err := l.List(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	if len(listing.Revisions) != procs*rounds || listing.Highest() != procs*rounds {
		t.Fatalf("revisions %v, want 1..%d", listing.Revisions, procs*rounds)
	}
	published, err := installertest.Check(l, candidates...)
	if err != nil {
		t.Fatal(err)
	}
	if published != procs*rounds {
		t.Fatalf("published %d, want %d", published, procs*rounds)
	}
}

// killSomewhereIn starts cmd, SIGKILLs it after a random delay below
// duration and waits for it. It reports the delay and whether the kill
// landed (false when cmd had finished by itself, successfully: a failure of
// its own fails the test, named by what).
func killSomewhereIn(t *testing.T, cmd *exec.Cmd, duration time.Duration, what string) (time.Duration, bool) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	delay := time.Duration(mrand.Int64N(int64(duration)))
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return delay, true
	}
	if err != nil {
		t.Fatalf("%s failed by itself: %v\n%s", what, err, out.String())
	}
	return delay, false
}
