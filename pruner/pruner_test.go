package pruner_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/pruner"
	"github.com/revgate/revgate/revisions"
	"github.com/revgate/revgate/revisions/fsfault"
)

var (
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
	fast  = fsfault.NoSync(revisions.OS())
)

var files = installertest.Files{"configmaps/config/a.yaml": []byte("a"), "secrets/s/k": []byte("k")}

// scenario installs revisions 1..n, each over the one operand manifest, and
// returns the layout.
func scenario(t *testing.T, n int) revisions.Layout {
	t.Helper()
	return scenarioIn(t, n, revisions.PublishReplace)
}

// scenarioIn installs revisions 1..n with publish mode p. In slots mode no
// revision is judged, so revision 1 keeps serving in slot a and revision n
// is published in slot b.
func scenarioIn(t *testing.T, n int, p revisions.PublishMode) revisions.Layout {
	t.Helper()
	root := t.TempDir()
	l := revisions.Layout{
		Target:       "gw",
		ResourceDir:  filepath.Join(root, "resources"),
		ManifestsDir: filepath.Join(root, "manifests"),
		LockFile:     filepath.Join(root, "gw.lock"),
	}.Defaulted()
	cfg := &installer.Config{}
	_ = cfg.AddConfigMapKey("config", "a.yaml", []byte("a"))
	_ = cfg.AddSecretKey("s", "k", []byte("k"))
	for range n {
		in := &installer.Installer{FS: fast, Layout: l, Source: source{cfg}, Render: installer.RenderOptions{Binary: "/bin/revgate", Publish: p}, Logger: quiet}
		if _, err := in.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

type source struct{ cfg *installer.Config }

func (s source) Load(context.Context) (*installer.Config, error) { return s.cfg, nil }

func revisionsOf(t *testing.T, l revisions.Layout) []int {
	t.Helper()
	got, err := l.List(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	return got.Revisions
}

// publishOperand publishes revision n's operand manifest (as a fallback or a
// retry would).
func publishOperand(t *testing.T, l revisions.Layout, n int) {
	data, err := os.ReadFile(l.RevisionPodManifest(n))
	if err != nil {
		t.Fatal(err)
	}
	if err := revisions.OS().Publish(l.PublishedPodManifest(), data); err != nil {
		t.Fatal(err)
	}
}

func setRetry(t *testing.T, l revisions.Layout, n int) {
	next := time.Now().Add(time.Hour)
	err := revisions.UpdateState(revisions.OS(), l.StateFile(), func(s *revisions.State) error {
		r := s.Get(n)
		r.Outcome, r.NextRetry = revisions.OutcomeFailed, &next
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		keep  int
		setup func(t *testing.T, l revisions.Layout)
		want  []int
	}{
		{name: "keeps the newest", n: 6, keep: 3, want: []int{4, 5, 6}},
		{name: "keep zero keeps the published", n: 3, keep: 0, want: []int{3}},
		{name: "nothing to do", n: 2, keep: 3, want: []int{1, 2}},
		{
			name: "last-known-good", n: 6, keep: 2, want: []int{2, 5, 6},
			setup: func(t *testing.T, l revisions.Layout) {
				if err := l.SetLastKnownGood(revisions.OS(), 2); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "published operand after a fallback", n: 6, keep: 1, want: []int{3, 6},
			setup: func(t *testing.T, l revisions.Layout) { publishOperand(t, l, 3) },
		},
		{
			name: "published monitor", n: 6, keep: 1, want: []int{1, 4, 6},
			setup: func(t *testing.T, l revisions.Layout) {
				data, _ := os.ReadFile(l.RevisionMonitorManifest(4))
				if err := revisions.OS().Publish(l.PublishedMonitorManifest(), data); err != nil {
					t.Fatal(err)
				}
				publishOperand(t, l, 1)
			},
		},
		{
			name: "pending retry", n: 6, keep: 2, want: []int{1, 5, 6},
			setup: func(t *testing.T, l revisions.Layout) { setRetry(t, l, 1) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := scenario(t, tt.n)
			if tt.setup != nil {
				tt.setup(t, l)
			}
			p := &pruner.Pruner{Layout: l, FS: fast, Keep: tt.keep, Logger: quiet}
			res, err := p.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := revisionsOf(t, l); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("left %v, want %v", got, tt.want)
			}
			for _, n := range res.Removed {
				if _, kept := res.Kept[n]; kept {
					t.Fatalf("revision %d both removed and kept", n)
				}
			}
			if _, err := installertest.Check(l, files); err != nil {
				t.Fatal(err)
			}
			s, err := revisions.LoadState(revisions.OS(), l.StateFile())
			if err != nil {
				t.Fatal(err)
			}
			var inState []int
			for n := range s.Revisions {
				inState = append(inState, n)
			}
			sort.Ints(inState)
			if !reflect.DeepEqual(inState, tt.want) {
				t.Fatalf("state still knows %v, want %v", inState, tt.want)
			}
		})
	}
}

func TestPruneDryRunAndIgnoredNames(t *testing.T) {
	l := scenario(t, 5)
	for _, name := range []string{"gw-pod-x", "gw-pod-007"} {
		if err := os.Mkdir(filepath.Join(l.ResourceDir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res, err := (&pruner.Pruner{Layout: l, FS: fast, Keep: 1, DryRun: true, Logger: quiet}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Removed, []int{1, 2, 3, 4}) || len(revisionsOf(t, l)) != 5 {
		t.Fatalf("dry run: would remove %v, left %v", res.Removed, revisionsOf(t, l))
	}
	res, err = (&pruner.Pruner{Layout: l, FS: fast, Keep: 1, Logger: quiet}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := revisionsOf(t, l); !reflect.DeepEqual(got, []int{5}) {
		t.Fatalf("left %v", got)
	}
	if !reflect.DeepEqual(res.Ignored, []string{"gw-pod-007", "gw-pod-x"}) {
		t.Fatalf("ignored %v", res.Ignored)
	}
	for _, name := range res.Ignored {
		if _, err := os.Stat(filepath.Join(l.ResourceDir, name)); err != nil {
			t.Fatalf("unparsable %s removed: %v", name, err)
		}
	}
}

func TestPruneRefusesWhenUnsure(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, l revisions.Layout)
	}{
		{"dangling last-known-good", func(t *testing.T, l revisions.Layout) {
			if err := os.Symlink("gw-pod-99/gw-pod.yaml", l.LastKnownGoodLink()); err != nil {
				t.Fatal(err)
			}
		}},
		{"unreadable published manifest", func(t *testing.T, l revisions.Layout) {
			if err := os.WriteFile(l.PublishedPodManifest(), []byte("metadata: ["), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt state", func(t *testing.T, l revisions.Layout) {
			if err := os.WriteFile(l.StateFile(), []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := scenario(t, 4)
			tt.setup(t, l)
			if _, err := (&pruner.Pruner{Layout: l, FS: fast, Keep: 1, Logger: quiet}).Run(context.Background()); err == nil {
				t.Fatal("pruned although the protected revisions are unknown")
			}
			if got := revisionsOf(t, l); len(got) != 4 {
				t.Fatalf("removed something: %v", got)
			}
		})
	}
}

func TestPruneWaitsForTheLock(t *testing.T) {
	l := scenario(t, 4)
	lock, err := revisions.AcquireLock(context.Background(), l.LockFile, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, err = (&pruner.Pruner{Layout: l, FS: fast, Keep: 1, LockTimeout: 100 * time.Millisecond, Logger: quiet}).Run(context.Background())
	if !errors.Is(err, revisions.ErrLockTimeout) {
		t.Fatalf("want ErrLockTimeout, got %v", err)
	}
	if got := revisionsOf(t, l); len(got) != 4 {
		t.Fatalf("removed under someone else's lock: %v", got)
	}
}

// TestPruneKeepsWhatASlotServes: in slots mode the revisions of both slots
// stay, whatever the others.
func TestPruneKeepsWhatASlotServes(t *testing.T) {
	for _, tt := range []struct {
		name string
		lkg  int
		want []int
	}{
		{"serving and candidate", 0, []int{1, 6}},
		{"and the last-known-good revision", 4, []int{1, 4, 6}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := scenarioIn(t, 6, revisions.PublishSlots)
			if tt.lkg > 0 {
				if err := l.SetLastKnownGood(revisions.OS(), tt.lkg); err != nil {
					t.Fatal(err)
				}
			}
			res, err := (&pruner.Pruner{Layout: l, FS: fast, Keep: 0, Logger: quiet}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := revisionsOf(t, l); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("left %v, want %v", got, tt.want)
			}
			if why := res.Kept[1]; why != "published operand manifest (slot a)" {
				t.Fatalf("revision 1 kept as %q", why)
			}
		})
	}
}

// TestPruneFaultAtEveryStep fails each file-system operation of a prune in
// turn, in both publish modes: every revision is whole or gone, the
// protected ones stay, the last-known-good link resolves, and a second
// prune finishes the job.
func TestPruneFaultAtEveryStep(t *testing.T) {
	for _, tt := range []struct {
		publish revisions.PublishMode
		want    []int
	}{
		{revisions.PublishReplace, []int{2, 3, 5, 6}},
		// Revision 1 still serves in slot a.
		{revisions.PublishSlots, []int{1, 2, 3, 5, 6}},
	} {
		t.Run(string(tt.publish), func(t *testing.T) { testPruneFaultAtEveryStep(t, tt.publish, tt.want) })
	}
}

func testPruneFaultAtEveryStep(t *testing.T, publish revisions.PublishMode, want []int) {
	setup := func(t *testing.T) revisions.Layout {
		l := scenarioIn(t, 6, publish)
		if err := l.SetLastKnownGood(revisions.OS(), 2); err != nil {
			t.Fatal(err)
		}
		setRetry(t, l, 3)
		return l
	}
	l := setup(t)
	j := fsfault.New(0, fsfault.Once)
	if _, err := (&pruner.Pruner{Layout: l, FS: j.Wrap(fast), Keep: 2, Logger: quiet}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := j.Count()
	if got := revisionsOf(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("fault-free prune left %v", got)
	}
	for _, mode := range []fsfault.Mode{fsfault.Once, fsfault.Crash} {
		for n := 1; n <= total; n++ {
			l := setup(t)
			j := fsfault.New(n, mode)
			_, err := (&pruner.Pruner{Layout: l, FS: j.Wrap(fast), Keep: 2, Logger: quiet}).Run(context.Background())
			if err != nil && !errors.Is(err, fsfault.ErrInjected) {
				t.Fatalf("mode %d fault %d (%s): %v", mode, n, j.Hit(), err)
			}
			if _, err := installertest.Check(l, files); err != nil {
				t.Fatalf("mode %d fault %d (%s): %v", mode, n, j.Hit(), err)
			}
			got := revisionsOf(t, l)
			for _, keep := range want {
				if sort.SearchInts(got, keep) == len(got) || got[sort.SearchInts(got, keep)] != keep {
					t.Fatalf("mode %d fault %d (%s): protected revision %d removed: %v", mode, n, j.Hit(), keep, got)
				}
			}
			if _, err := (&pruner.Pruner{Layout: l, FS: fast, Keep: 2, Logger: quiet}).Run(context.Background()); err != nil {
				t.Fatalf("mode %d fault %d: second prune: %v", mode, n, err)
			}
			if got := revisionsOf(t, l); !reflect.DeepEqual(got, want) {
				t.Fatalf("mode %d fault %d: after the second prune %v", mode, n, got)
			}
			s, err := revisions.LoadState(revisions.OS(), l.StateFile())
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Revisions) != len(want) || s.Revisions[3].NextRetry == nil {
				t.Fatalf("mode %d fault %d: state after the second prune %v", mode, n, s.Revisions)
			}
			es, _ := os.ReadDir(l.ResourceDir)
			for _, e := range es {
				if revisions.IsTempName(e.Name()) {
					t.Fatalf("mode %d fault %d: %s left", mode, n, e.Name())
				}
			}
		}
	}
}
