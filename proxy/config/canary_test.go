package config

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// A canary without percentage or start is a timed rollout starting "now",
// as Kong's: for a revision, the moment it was installed, so that a proxy
// restarted (after a crash, a make-before-break replacement, a fallback and
// retry) resumes the rollout where it was instead of starting it over.
func TestCanaryStartDefaultsToTheConfigurationTime(t *testing.T) {
	installed := time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)
	doc := service("default", "app", "http:80:80") + "---\n" + service("default", "beta", "http:80:80") + "---\n" +
		"apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata:\n  name: r\nspec:\n  virtualhost:\n    fqdn: foo.com\n  routes:\n  - match: /\n    services:\n    - {name: app, port: 80}\n    canary:\n      service: {name: beta, port: 80}\n"
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: revgate\n  labels: {revision: \"3\"}\n  annotations:\n    revgate.io/installed-at: \"" + installed.Format(time.RFC3339) + "\"\n"
	start := func(t *testing.T, dir string) time.Time {
		t.Helper()
		snap, err := Build(Options{Dirs: []string{dir}})
		if err != nil {
			t.Fatal(err)
		}
		r := findRoute(snap, "foo.com", "/", model.PathPrefix)
		if r == nil || r.Cluster.Canary == nil {
			t.Fatalf("no canary:\n%s", dumpProblems(snap))
		}
		return r.Cluster.Canary.Start
	}
	t.Run("revision folder: its install time, every time", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "revgate-pod-3")
		writeFiles(t, dir, map[string]string{"revgate-pod.yaml": manifest, "configmaps/gw/routes.yaml": doc})
		for i := 0; i < 2; i++ {
			if got := start(t, dir); !got.Equal(installed) {
				t.Fatalf("build %d: start %v, want the install time %v", i, got, installed)
			}
		}
	})
	t.Run("plain folder: when it is loaded", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"routes.yaml": doc})
		before := time.Now()
		got := start(t, dir)
		if got.Before(before) || got.After(time.Now()) {
			t.Fatalf("start %v, want the build time", got)
		}
	})
	t.Run("revision without an install time: when it is loaded", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "revgate-pod-3")
		writeFiles(t, dir, map[string]string{"revgate-pod.yaml": "kind: Pod\n", "configmaps/gw/routes.yaml": doc})
		before := time.Now()
		if got := start(t, dir); got.Before(before) {
			t.Fatalf("start %v, want the build time", got)
		}
	})
}
