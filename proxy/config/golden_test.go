package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenView is what a golden file pins down: the fallback report, the
// status of every object, and a summary of routes and problems.
type goldenView struct {
	Fallback model.FallbackReport `json:"fallback"`
	Objects  []model.ObjectStatus `json:"objects"`
	Routes   []string             `json:"routes"`
	Problems []string             `json:"problems"`
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name string
		rev  int
		mode model.FallbackMode
	}{
		{"ok", 1, model.FallbackExclude},
		{"broken-ingressclass", 1, model.FallbackExclude},
		{"broken-service", 1, model.FallbackExclude},
		{"broken-tls-secret", 1, model.FallbackExclude},
		{"broken-endpointslice", 1, model.FallbackExclude},
		{"broken-ingress", 1, model.FallbackExclude},
		{"broken-ingressroute-chain", 1, model.FallbackExclude},
		{"several-broken", 1, model.FallbackExclude},
		{"backfill-with-lkg", 2, model.FallbackBackfill},
		{"backfill-without-lkg", 2, model.FallbackBackfill},
		{"off-broken-service", 1, model.FallbackOff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "golden", tt.name)
			snap, err := Build(Options{Dirs: []string{filepath.Join(dir, "revgate-pod-"+itoa(tt.rev))}, Fallback: tt.mode, Revision: tt.rev})
			if err != nil {
				t.Fatal(err)
			}
			if snap.Revision != tt.rev || snap.Mode != tt.mode || snap.TranslationDuration <= 0 {
				t.Fatalf("revision %d mode %s duration %s", snap.Revision, snap.Mode, snap.TranslationDuration)
			}
			v := goldenView{Fallback: snap.Fallback, Objects: snap.Objects, Routes: []string{}, Problems: []string{}}
			for _, r := range snap.Routes {
				s := r.Host + r.Path + " " + string(r.PathType) + " <- " + r.Source.String()
				if r.Backfilled {
					s += " (backfilled)"
				}
				v.Routes = append(v.Routes, s)
			}
			for _, p := range snap.Problems {
				v.Problems = append(v.Problems, string(p.Severity)+": "+p.String())
			}
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join(dir, "expected.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from the translation (run with -update after checking):\n%s", path, got)
			}
		})
	}
}
