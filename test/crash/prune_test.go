package crash

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/revisions"
)

// writeRevisions writes revisions from..to directly (no fsyncs: the test is
// about the pruner), each with files configuration files, and publishes the
// last one.
func writeRevisions(t *testing.T, l revisions.Layout, from, to int, files installertest.Files) {
	t.Helper()
	at := time.Now()
	var pod []byte
	for n := from; n <= to; n++ {
		dir := l.RevisionDir(n)
		for rel, data := range files {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		opts := installer.RenderOptions{Binary: "/usr/bin/revgate"}
		if pod, err = installer.Marshal(installer.OperandPod(l, n, opts, at)); err != nil {
			t.Fatal(err)
		}
		monitor, err := installer.Marshal(installer.MonitorPod(l, n, opts, at))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.RevisionPodManifest(n), pod, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.RevisionMonitorManifest(n), monitor, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(l.ManifestsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.PublishedPodManifest(), pod, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pruneCmd(l revisions.Layout) *exec.Cmd {
	return exec.Command(binary, "prune", "--keep=1",
		"--target="+l.Target, "--resource-dir="+l.ResourceDir, "--manifests-dir="+l.ManifestsDir,
		"--lock-file="+l.LockFile, "--lock-timeout=30s")
}

// TestSIGKILLDuringPrune kills `revgate prune` at random points while it
// removes large revisions: a revision is never seen half-removed under its
// real name, the protected ones stay, and the next prune finishes the job.
func TestSIGKILLDuringPrune(t *testing.T) {
	files := installertest.Files{}
	for i := range 600 {
		files[fmt.Sprintf("configmaps/c%d/k%d", i%10, i)] = []byte(fmt.Sprintf("key %d\n", i))
	}
	// Measure one prune.
	l := installertest.TempLayout(t)
	writeRevisions(t, l, 1, 5, files)
	start := time.Now()
	if out, err := pruneCmd(l).CombinedOutput(); err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	duration := time.Since(start)
	t.Logf("a prune of 4 revisions takes about %v", duration)

	const minKills, maxKills, budget = 8, 15, 12 * time.Second
	deadline := time.Now().Add(budget)
	killed, runs := 0, 0
	for i := range maxKills {
		if i >= minKills && time.Now().After(deadline) {
			break
		}
		runs++
		l := installertest.TempLayout(t)
		writeRevisions(t, l, 1, 5, files)
		if err := l.SetLastKnownGood(revisions.OS(), 2); err != nil {
			t.Fatal(err)
		}
		delay, wasKilled := killSomewhereIn(t, pruneCmd(l), duration, fmt.Sprintf("kill %d: prune", i))
		if wasKilled {
			killed++
		}
		if _, err := installertest.Check(l, files); err != nil {
			t.Fatalf("kill %d after %v: %v", i, delay, err)
		}
		got, err := l.List(revisions.OS())
		if err != nil {
			t.Fatal(err)
		}
		if !got.Has(2) || !got.Has(5) {
			t.Fatalf("kill %d: a protected revision is gone: %v", i, got.Revisions)
		}
		if out, err := pruneCmd(l).CombinedOutput(); err != nil {
			t.Fatalf("kill %d: recovery prune: %v\n%s", i, err, out)
		}
		got, _ = l.List(revisions.OS())
		if !reflect.DeepEqual(got.Revisions, []int{2, 5}) {
			t.Fatalf("kill %d: after recovery %v, want [2 5]", i, got.Revisions)
		}
		if err := checkNoTemps(l); err != nil {
			t.Fatalf("kill %d: after recovery: %v", i, err)
		}
	}
	t.Logf("%d of %d prunes were killed before they finished", killed, runs)
	if killed < runs/3 {
		t.Fatalf("only %d of %d kills landed inside a prune", killed, runs)
	}
}
