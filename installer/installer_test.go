package installer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/revisions"
	"github.com/revgate/revgate/revisions/fsfault"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var exampleSource = map[string]string{
	"ingress.yaml":               "kind: Ingress\n",
	"configmaps/extra/svc.yaml":  "kind: Service\n",
	"configmaps/config/eps.yaml": "kind: EndpointSlice\n",
	"secrets/tls/tls.crt":        "CERT",
	"secrets/tls/tls.key":        "KEY",
}

var exampleFiles = installertest.Files{
	"configmaps/config/ingress.yaml": []byte("kind: Ingress\n"),
	"configmaps/config/eps.yaml":     []byte("kind: EndpointSlice\n"),
	"configmaps/extra/svc.yaml":      []byte("kind: Service\n"),
	"secrets/tls/tls.crt":            []byte("CERT"),
	"secrets/tls/tls.key":            []byte("KEY"),
}

// fast is the real file system without fsyncs: these tests check what a
// failing or dying process leaves, not durability across power loss.
var fast = fsfault.NoSync(revisions.OS())

func newInstaller(l revisions.Layout, src installer.Source) *installer.Installer {
	return &installer.Installer{
		FS:          fast,
		Layout:      l,
		Source:      src,
		Render:      installer.RenderOptions{Binary: "/usr/bin/revgate"},
		LockTimeout: 10 * time.Second,
		Clock:       clocktesting.NewFakePassiveClock(installedAt),
		Logger:      quiet,
	}
}

func TestInstallLocalSource(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	res, err := newInstaller(l, src).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 1 || !res.Published || res.Dir != l.RevisionDir(1) {
		t.Fatalf("result %+v", res)
	}
	if n, err := installertest.Check(l, exampleFiles); err != nil || n != 1 {
		t.Fatalf("published %d: %v", n, err)
	}
	for rel, want := range map[string]os.FileMode{
		"secrets":                   0o700,
		"secrets/tls":               0o700,
		"secrets/tls/tls.key":       0o600,
		"configmaps":                0o755,
		"configmaps/extra":          0o755,
		"configmaps/extra/svc.yaml": 0o644,
		"gw-pod.yaml":               0o644,
	} {
		fi, err := os.Stat(filepath.Join(res.Dir, rel))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", rel, fi.Mode().Perm(), want, err)
		}
	}
	st, err := revisions.LoadState(revisions.OS(), l.Defaulted().StateFile())
	if err != nil {
		t.Fatal(err)
	}
	r := st.Revisions[1]
	if r == nil || r.Outcome != revisions.OutcomeInstalled || !r.InstalledAt.Equal(installedAt) || r.Attempts != 1 {
		t.Fatalf("state %+v", r)
	}

	// The next install takes the next revision and publishes it.
	res, err = newInstaller(l, src).Run(context.Background())
	if err != nil || res.Revision != 2 {
		t.Fatalf("second install: %+v %v", res, err)
	}
	if n, err := installertest.Check(l, exampleFiles); err != nil || n != 2 {
		t.Fatalf("published %d: %v", n, err)
	}
}

func TestInstallRefusesLowerOrEqualRevision(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	in := newInstaller(l, src)
	in.Revision = 5
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, rev := range []int{5, 3} {
		in := newInstaller(l, src)
		in.Revision = rev
		_, err := in.Run(context.Background())
		if !errors.Is(err, installer.ErrRevisionTooLow) {
			t.Fatalf("revision %d: want ErrRevisionTooLow, got %v", rev, err)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(rev)) || !strings.Contains(msg, "5") {
			t.Errorf("error does not name both revisions: %s", msg)
		}
	}
	if got, _ := l.Defaulted().List(revisions.OS()); !reflect.DeepEqual(got.Revisions, []int{5}) {
		t.Fatalf("revisions %v", got.Revisions)
	}
	if n, err := installertest.Check(l, exampleFiles); err != nil || n != 5 {
		t.Fatalf("published %d: %v", n, err)
	}
}

// The precondition sees the highest revision under the lock, and its error
// leaves everything as it was.
func TestInstallPrecondition(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	var seen []int
	errStale := errors.New("stale")
	for i, fail := range []bool{false, true, false} {
		in := newInstaller(l, src)
		in.Precondition = func(highest int) error {
			seen = append(seen, highest)
			if fail {
				return errStale
			}
			return nil
		}
		_, err := in.Run(context.Background())
		if fail != errors.Is(err, errStale) {
			t.Fatalf("install %d: err %v", i, err)
		}
	}
	if !reflect.DeepEqual(seen, []int{0, 1, 1}) {
		t.Fatalf("precondition saw %v", seen)
	}
	if got, _ := l.Defaulted().List(revisions.OS()); !reflect.DeepEqual(got.Revisions, []int{1, 2}) {
		t.Fatalf("revisions %v", got.Revisions)
	}
	if n, err := installertest.Check(l, exampleFiles); err != nil || n != 2 {
		t.Fatalf("published %d: %v", n, err)
	}
}

type fixedSource struct{ cfg *installer.Config }

func (s fixedSource) Load(context.Context) (*installer.Config, error) { return s.cfg, nil }

func TestInstallRefusesEscapingKeys(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  *installer.Config
		want string
	}{
		{"configmap key", &installer.Config{ConfigMaps: map[string]map[string][]byte{"c": {"../../etc/passwd": nil}}}, `"../../etc/passwd"`},
		{"secret key", &installer.Config{Secrets: map[string]map[string][]byte{"s": {"a/b": nil}}}, `"a/b"`},
		{"configmap name", &installer.Config{ConfigMaps: map[string]map[string][]byte{"..": {"k": nil}}}, `".."`},
		{"secret name", &installer.Config{Secrets: map[string]map[string][]byte{"": {"k": nil}}}, `""`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := installertest.TempLayout(t)
			_, err := newInstaller(l, fixedSource{tt.cfg}).Run(context.Background())
			if !errors.Is(err, revisions.ErrPathEscape) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want a path-escape error naming %s, got %v", tt.want, err)
			}
			if _, err := os.Stat(l.ResourceDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("something was written: %v", err)
			}
		})
	}
}

func TestLocalSourceSkipsHiddenEntriesAndGoFiles(t *testing.T) {
	files := map[string]string{
		".git/HEAD":                           "ref",
		".swp":                                "x",
		"configmaps/.hidden/k":                "x",
		"configmaps/routes/..data/k":          "x",
		"configmaps/routes/.ingress.yaml.swp": "x",
		"configmaps/routes/ingress.yaml":      "kind: Ingress\n",
		// The examples folder holds the Go package embedding it.
		"examples.go":               "package examples\n",
		"configmaps/routes/main.go": "a key of a ConfigMap, kept",
	}
	cfg, err := (&installer.LocalSource{Dir: installertest.SourceDir(t, files), Logger: quiet}).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := installertest.Files{
		"configmaps/routes/ingress.yaml": []byte("kind: Ingress\n"),
		"configmaps/routes/main.go":      []byte("a key of a ConfigMap, kept"),
	}
	if got := installertest.FilesOf(cfg); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %v", got)
	}
}

func TestLocalSourceRefusals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"nested key folder", map[string]string{"configmaps/a/sub/k": "x"}, "configmaps/a/sub"},
		{"object that is a file", map[string]string{"secrets/s": "x"}, "secrets/s"},
		{"unknown folder", map[string]string{"other/x": "x"}, "other"},
		{"key twice", map[string]string{"k": "1", "configmaps/config/k": "2"}, `"k"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&installer.LocalSource{Dir: installertest.SourceDir(t, tt.files)}).Load(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error naming %s, got %v", tt.want, err)
			}
		})
	}
}

func TestValidation(t *testing.T) {
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	t.Run("sees a staged copy", func(t *testing.T) {
		l := installertest.TempLayout(t)
		in := newInstaller(l, src)
		var seen installertest.Files
		in.Validator = installer.ValidatorFunc(func(_ context.Context, dir string) ([]string, error) {
			seen = installertest.Files{}
			err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				seen[filepath.ToSlash(rel)], err = os.ReadFile(p)
				return err
			})
			if _, serr := os.Stat(l.ResourceDir); serr == nil {
				t.Error("resource dir written before validation")
			}
			return []string{"a warning"}, err
		})
		res, err := in.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(seen, exampleFiles) {
			t.Fatalf("validator saw %v", seen)
		}
		if !reflect.DeepEqual(res.Warnings, []string{"a warning"}) {
			t.Fatalf("warnings %v", res.Warnings)
		}
	})
	for _, tt := range []struct {
		name   string
		strict bool
		v      installer.ValidatorFunc
	}{
		{"error", false, func(context.Context, string) ([]string, error) { return nil, errors.New("ingress x: no such service") }},
		{"warning in strict mode", true, func(context.Context, string) ([]string, error) { return []string{"deprecated field"}, nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := installertest.TempLayout(t)
			in := newInstaller(l, src)
			in.Validator, in.Strict = tt.v, tt.strict
			_, err := in.Run(context.Background())
			var verr *installer.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("want a ValidationError, got %v", err)
			}
			if _, err := os.Stat(l.ResourceDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("something was written: %v", err)
			}
		})
	}
}

func TestInstallSupersedesPendingRetries(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	if _, err := newInstaller(l, src).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, state := revisions.OS(), l.Defaulted().StateFile()
	next := installedAt.Add(time.Hour)
	err := revisions.UpdateState(f, state, func(s *revisions.State) error {
		r := s.Get(1)
		r.Outcome, r.Reason, r.NextRetry = revisions.OutcomeFailed, revisions.ReasonNotReady, &next
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newInstaller(l, src).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, err := revisions.LoadState(f, state)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Revisions[1]; r.Outcome != revisions.OutcomeSuperseded || r.NextRetry != nil || r.Reason != revisions.ReasonNotReady {
		t.Fatalf("revision 1: %+v", r)
	}
	if len(s.PendingRetries()) != 0 || s.Revisions[2].Outcome != revisions.OutcomeInstalled {
		t.Fatalf("state %+v", s.Revisions)
	}
}

func TestPublishOrderAndNoPublish(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	in := newInstaller(l, src)
	var published []string
	f := fast
	rename := f.Rename
	f.Rename = func(o, n string) error {
		if filepath.Dir(n) == l.ManifestsDir {
			published = append(published, filepath.Base(n))
		}
		return rename(o, n)
	}
	in.FS = f
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"gw-startup-monitor-pod.yaml", "gw-pod.yaml"}; !reflect.DeepEqual(published, want) {
		t.Fatalf("published %v, want monitor first: %v", published, want)
	}

	in = newInstaller(l, src)
	in.NoPublish = true
	res, err := in.Run(context.Background())
	if err != nil || res.Published || res.Revision != 2 {
		t.Fatalf("no-publish: %+v %v", res, err)
	}
	if n, err := installertest.Check(l, exampleFiles); err != nil || n != 1 {
		t.Fatalf("published %d after --no-publish: %v", n, err)
	}
}

// TestInstallFaultAtEveryStep fails each file-system operation of an install
// in turn, once and as a crash, in both publish modes, and checks after each
// that the disk holds the old state or the complete new revision, and that a
// later install succeeds.
func TestInstallFaultAtEveryStep(t *testing.T) {
	for _, publish := range []revisions.PublishMode{revisions.PublishSlots, revisions.PublishReplace} {
		t.Run(string(publish), func(t *testing.T) { testInstallFaultAtEveryStep(t, publish) })
	}
}

func testInstallFaultAtEveryStep(t *testing.T, publish revisions.PublishMode) {
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	newInstaller := func(l revisions.Layout, src installer.Source) *installer.Installer {
		in := newInstaller(l, src)
		in.Render.Publish = publish
		return in
	}
	setup := func(t *testing.T) revisions.Layout {
		l := installertest.TempLayout(t)
		if _, err := newInstaller(l, src).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := l.Defaulted().SetLastKnownGood(revisions.OS(), 1); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := setup(t)
	j := fsfault.New(0, fsfault.Once)
	in := newInstaller(l, src)
	in.FS = j.Wrap(fast)
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := j.Count()
	if total < 30 {
		t.Fatalf("only %d operations counted", total)
	}
	for _, mode := range []fsfault.Mode{fsfault.Once, fsfault.Crash} {
		for n := 1; n <= total; n++ {
			l := setup(t)
			j := fsfault.New(n, mode)
			in := newInstaller(l, src)
			in.FS = j.Wrap(fast)
			res, err := in.Run(context.Background())
			if err != nil && !errors.Is(err, fsfault.ErrInjected) {
				t.Fatalf("mode %d fault %d (%s): unexpected error %v", mode, n, j.Hit(), err)
			}
			published, cerr := installertest.Check(l, exampleFiles)
			if cerr != nil {
				t.Fatalf("mode %d fault %d (%s): %v", mode, n, j.Hit(), cerr)
			}
			if err == nil && (res.Revision != 2 || published != 2) {
				t.Fatalf("mode %d fault %d (%s): no error but published %d", mode, n, j.Hit(), published)
			}
			if mode == fsfault.Once && err != nil {
				// A failed install cleans up after itself.
				if terr := noTemps(l); terr != nil {
					t.Fatalf("once fault %d (%s): %v", n, j.Hit(), terr)
				}
			}
			if lkg, err := l.Defaulted().LastKnownGood(revisions.OS()); err != nil || lkg != 1 {
				t.Fatalf("mode %d fault %d: last-known-good %d %v", mode, n, lkg, err)
			}
			// Recovery: the next install succeeds, publishes, leaves no temp behind.
			res, err = newInstaller(l, src).Run(context.Background())
			if err != nil {
				t.Fatalf("mode %d fault %d (%s): recovery install: %v", mode, n, j.Hit(), err)
			}
			if published, err := installertest.Check(l, exampleFiles); err != nil || published != res.Revision {
				t.Fatalf("mode %d fault %d: after recovery published %d of %d: %v", mode, n, published, res.Revision, err)
			}
			if err := noTemps(l); err != nil {
				t.Fatalf("mode %d fault %d: after recovery: %v", mode, n, err)
			}
		}
	}
}

func noTemps(l revisions.Layout) error {
	for _, dir := range []string{l.ResourceDir, l.ManifestsDir} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if revisions.IsTempName(e.Name()) {
				return fmt.Errorf("temp %s left in %s", e.Name(), dir)
			}
		}
	}
	return nil
}

func TestInstallRefusesCorruptState(t *testing.T) {
	l := installertest.TempLayout(t)
	if err := os.MkdirAll(l.ResourceDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.Defaulted().StateFile(), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newInstaller(l, &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}).Run(context.Background()); err == nil {
		t.Fatal("installed over an unreadable state file")
	}
	if got, _ := l.Defaulted().List(revisions.OS()); len(got.Revisions) != 0 {
		t.Fatalf("revisions written: %v", got.Revisions)
	}
}

// TestRacingInstallers runs installers with separate lock handles against one
// target, each with its own source: revisions never go backwards and no
// revision mixes files of two sources.
func TestRacingInstallers(t *testing.T) {
	l := installertest.TempLayout(t)
	const workers, rounds = 4, 5
	var candidates []installertest.Files
	var srcs []installer.Source
	for w := range workers {
		files := map[string]string{}
		want := installertest.Files{}
		for k := range 20 {
			content := fmt.Sprintf("worker %d key %d\n", w, k)
			files[fmt.Sprintf("configmaps/c%d/k%d", k%3, k)] = content
			want[fmt.Sprintf("configmaps/c%d/k%d", k%3, k)] = []byte(content)
		}
		candidates = append(candidates, want)
		srcs = append(srcs, &installer.LocalSource{Dir: installertest.SourceDir(t, files)})
	}
	var (
		mu   sync.Mutex
		seen []int
		wg   sync.WaitGroup
		errs = make(chan error, workers*rounds)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				res, err := newInstaller(l, srcs[w]).Run(context.Background())
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen = append(seen, res.Revision)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	listing, err := l.Defaulted().List(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, workers*rounds)
	for i := range want {
		want[i] = i + 1
	}
	if !reflect.DeepEqual(listing.Revisions, want) {
		t.Fatalf("revisions %v, want 1..%d without gaps", listing.Revisions, workers*rounds)
	}
	published, err := installertest.Check(l, candidates...)
	if err != nil {
		t.Fatal(err)
	}
	if published != workers*rounds {
		t.Fatalf("published %d, want the highest %d", published, workers*rounds)
	}
}

type recordedEvent struct{ typ, reason, msg string }

type eventRecorder struct {
	events []recordedEvent
	err    error
}

func (r *eventRecorder) Emit(_ context.Context, typ, reason, msg string) error {
	r.events = append(r.events, recordedEvent{typ, reason, msg})
	return r.err
}

func TestInstallRecordsAnEvent(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	rec := &eventRecorder{}
	in := newInstaller(l, src)
	in.Events = rec
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 1 || rec.events[0].reason != installer.EventRevisionInstalled || !strings.Contains(rec.events[0].msg, "revision 1 ") {
		t.Fatalf("events %+v", rec.events)
	}
	// A failing event sink does not fail the install; a failed install records nothing.
	rec = &eventRecorder{err: errors.New("api server down")}
	in = newInstaller(l, src)
	in.Events = rec
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec = &eventRecorder{}
	in = newInstaller(l, src)
	in.Events, in.Revision = rec, 1
	if _, err := in.Run(context.Background()); err == nil || len(rec.events) != 0 {
		t.Fatalf("refused install: %v, events %+v", err, rec.events)
	}
}
