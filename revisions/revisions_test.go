package revisions_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/revgate/revgate/revisions"
)

const holdLockEnv = "REVISIONS_TEST_HOLD_LOCK"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdLockEnv); path != "" {
		// Child process: take the lock, say so, and hold it until killed.
		if _, err := revisions.AcquireLock(context.Background(), path, 10*time.Second); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLockBetweenProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x-installer.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	_, err = revisions.AcquireLock(context.Background(), path, 200*time.Millisecond)
	if !errors.Is(err, revisions.ErrLockTimeout) {
		t.Fatalf("lock held by another process: want ErrLockTimeout, got %v", err)
	}
	// A holder killed with SIGKILL releases the lock with its death.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := revisions.AcquireLock(context.Background(), path, 10*time.Second)
	if err != nil {
		t.Fatalf("lock after the holder died: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestLockBetweenHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, err := revisions.AcquireLock(context.Background(), path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := revisions.AcquireLock(context.Background(), path, 100*time.Millisecond); !errors.Is(err, revisions.ErrLockTimeout) {
		t.Fatalf("second handle: want ErrLockTimeout, got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := revisions.AcquireLock(ctx, path, 0); err == nil {
		t.Fatal("cancelled context took a held lock")
	}
	got := make(chan error, 1)
	go func() {
		b, err := revisions.AcquireLock(context.Background(), path, 10*time.Second)
		if err == nil {
			err = b.Unlock()
		}
		got <- err
	}()
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after unlock: %v", err)
	}
}

func TestListIgnoresUnparsableNames(t *testing.T) {
	l := revisions.Layout{Target: "gw", ResourceDir: t.TempDir()}.Defaulted()
	for _, d := range []string{"gw-pod-1", "gw-pod-10", "gw-pod-2", "gw-pod-01", "gw-pod-x", "gw-pod-", "gw-pod--3", "gw-pod-0", ".gw-pod-4.tmp-abc", "other-pod-5", "gw-pod-6-old"} {
		if err := os.Mkdir(filepath.Join(l.ResourceDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(l.ResourceDir, "gw-pod-7"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := l.List(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 10}; !reflect.DeepEqual(got.Revisions, want) {
		t.Errorf("revisions %v, want %v", got.Revisions, want)
	}
	if want := []string{"gw-pod-", "gw-pod--3", "gw-pod-0", "gw-pod-01", "gw-pod-6-old", "gw-pod-7", "gw-pod-x"}; !reflect.DeepEqual(got.Ignored, want) {
		t.Errorf("ignored %v, want %v", got.Ignored, want)
	}
	if got.Highest() != 10 || !got.Has(2) || got.Has(3) {
		t.Errorf("Highest %d Has(2) %v Has(3) %v", got.Highest(), got.Has(2), got.Has(3))
	}
	missing := revisions.Layout{ResourceDir: filepath.Join(l.ResourceDir, "nope")}.Defaulted()
	if got, err := missing.List(revisions.OS()); err != nil || len(got.Revisions) != 0 || got.Highest() != 0 {
		t.Errorf("missing resource dir: %+v %v", got, err)
	}
}

func writeRevision(t *testing.T, l revisions.Layout, n int) {
	t.Helper()
	if err := os.MkdirAll(l.RevisionDir(n), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  labels:\n    revision: \"" + strconv.Itoa(n) + "\"\n"
	if err := os.WriteFile(l.RevisionPodManifest(n), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLastKnownGood(t *testing.T) {
	f := revisions.OS()
	tests := []struct {
		name    string
		link    func(l revisions.Layout) string // "" for no link
		want    int
		wantErr error
		anyErr  bool
	}{
		{name: "no link", link: func(revisions.Layout) string { return "" }, wantErr: revisions.ErrNoLastKnownGood},
		{name: "relative", link: func(revisions.Layout) string { return "gw-pod-2/gw-pod.yaml" }, want: 2},
		{name: "absolute inside", link: func(l revisions.Layout) string { return l.RevisionPodManifest(3) }, want: 3},
		{name: "other target", link: func(revisions.Layout) string { return "xx-pod-2/xx-pod.yaml" }, anyErr: true},
		{name: "other file", link: func(revisions.Layout) string { return "gw-pod-2/gw-startup-monitor-pod.yaml" }, anyErr: true},
		{name: "missing revision", link: func(revisions.Layout) string { return "gw-pod-9/gw-pod.yaml" }, anyErr: true},
		{name: "unparsable", link: func(revisions.Layout) string { return "gw-pod-02/gw-pod.yaml" }, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := revisions.Layout{Target: "gw", ResourceDir: t.TempDir()}.Defaulted()
			writeRevision(t, l, 2)
			writeRevision(t, l, 3)
			if target := tt.link(l); target != "" {
				if err := os.Symlink(target, l.LastKnownGoodLink()); err != nil {
					t.Fatal(err)
				}
			}
			got, err := l.LastKnownGood(f)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
			case tt.anyErr:
				if err == nil {
					t.Fatalf("no error, got revision %d", got)
				}
			default:
				if err != nil || got != tt.want {
					t.Fatalf("got %d, %v; want %d", got, err, tt.want)
				}
			}
		})
	}
	t.Run("set", func(t *testing.T) {
		l := revisions.Layout{Target: "gw", ResourceDir: t.TempDir()}.Defaulted()
		writeRevision(t, l, 4)
		if err := l.SetLastKnownGood(f, 5); err == nil {
			t.Fatal("set to a revision without a manifest")
		}
		if err := l.SetLastKnownGood(f, 4); err != nil {
			t.Fatal(err)
		}
		if target, _ := os.Readlink(l.LastKnownGoodLink()); target != "gw-pod-4/gw-pod.yaml" {
			t.Fatalf("link target %q, want relative", target)
		}
		dir, n, err := l.LastKnownGoodDir(f)
		if err != nil || n != 4 || dir != l.RevisionDir(4) {
			t.Fatalf("LastKnownGoodDir %q %d %v", dir, n, err)
		}
		if n, err := revisions.ReadRevisionLabel(f, l.LastKnownGoodLink()); err != nil || n != 4 {
			t.Fatalf("label through the link: %d %v", n, err)
		}
	})
}

func TestReadRevisionLabel(t *testing.T) {
	for _, tt := range []struct {
		name, data string
		want       int
		err        error
	}{
		{"ok", "metadata:\n  labels:\n    revision: \"7\"\n", 7, nil},
		{"missing", "metadata:\n  labels:\n    app: x\n", 0, revisions.ErrNoRevisionLabel},
		{"zero", "metadata:\n  labels:\n    revision: \"0\"\n", 0, revisions.ErrNoRevisionLabel},
		{"text", "metadata:\n  labels:\n    revision: seven\n", 0, revisions.ErrNoRevisionLabel},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := revisions.RevisionLabelOf([]byte(tt.data), "m")
			if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("got %d, %v; want %d, %v", got, err, tt.want, tt.err)
			}
		})
	}
	if _, err := revisions.ReadRevisionLabel(revisions.OS(), filepath.Join(t.TempDir(), "none")); !errors.Is(err, revisions.ErrNoManifest) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestStateRoundTrip(t *testing.T) {
	f := revisions.OS()
	path := filepath.Join(t.TempDir(), "gw-state.json")
	empty, err := revisions.LoadState(f, path)
	if err != nil || empty.Revisions == nil || len(empty.Revisions) != 0 {
		t.Fatalf("missing state: %+v %v", empty, err)
	}
	at := time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC)
	next := at.Add(10 * time.Minute)
	s := &revisions.State{LastKnownGood: 3}
	s.Get(3).Outcome = revisions.OutcomeGood
	r := s.Get(4)
	r.Outcome, r.Reason, r.Message, r.Attempts, r.NextRetry, r.InstalledAt = revisions.OutcomeFailed, revisions.ReasonNotReady, "a\nb", 2, &next, at
	r.Fallbacks = []revisions.Fallback{{Time: at, Reason: revisions.ReasonNotReady, Message: "m", To: 3, Attempt: 1}}
	s.Get(5).Outcome = revisions.OutcomeInstalled
	if err := revisions.SaveState(f, path, s); err != nil {
		t.Fatal(err)
	}
	got, err := revisions.LoadState(f, path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
	}
	if p := got.PendingRetries(); !reflect.DeepEqual(p, []int{4}) {
		t.Fatalf("pending retries %v", p)
	}
	err = revisions.UpdateState(f, path, func(s *revisions.State) error {
		s.Forget(func(n int) bool { return n != 3 })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = revisions.LoadState(f, path)
	if _, ok := got.Revisions[3]; ok || len(got.Revisions) != 2 {
		t.Fatalf("after Forget: %v", got.Revisions)
	}
	boom := errors.New("boom")
	if err := revisions.UpdateState(f, path, func(*revisions.State) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("UpdateState error %v", err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := revisions.LoadState(f, path); err == nil {
		t.Fatal("corrupt state parsed")
	}
}

func TestLayoutAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	l, err := revisions.Layout{Target: "gw", ResourceDir: "res", ManifestsDir: "/etc/m", LockFile: "run/gw.lock", TerminationLog: "log/t.log"}.Absolute()
	if err != nil {
		t.Fatal(err)
	}
	want := revisions.Layout{Target: "gw", ResourceDir: filepath.Join(wd, "res"), ManifestsDir: "/etc/m",
		LockFile: filepath.Join(wd, "run/gw.lock"), TerminationLog: filepath.Join(wd, "log/t.log")}
	if l != want {
		t.Fatalf("Absolute() = %+v, want %+v", l, want)
	}
}

func TestLiveFiles(t *testing.T) {
	l := revisions.Layout{Target: "gw", ResourceDir: "/srv/res"}.Defaulted()
	if got, want := l.LiveDir(), "/srv/res/gw-live"; got != want {
		t.Errorf("LiveDir %q, want %q", got, want)
	}
	if got, want := l.EndpointsFile(), "/srv/res/gw-live/endpoints.json"; got != want {
		t.Errorf("EndpointsFile %q, want %q", got, want)
	}
	// The live folder sits among the revisions and is none of them.
	if _, ok := l.ParseRevisionDirName(filepath.Base(l.LiveDir())); ok {
		t.Errorf("%s parses as a revision folder", l.LiveDir())
	}
	if _, _, ok := revisions.LayoutFromRevisionDir(l.LiveDir()); ok {
		t.Errorf("%s is taken for a revision folder", l.LiveDir())
	}
}
