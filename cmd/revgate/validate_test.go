package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/revgate/revgate/proxy/model"
)

func TestValidateCommand(t *testing.T) {
	warnOnly := t.TempDir()
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  colour: blue\n  ports:\n  - port: 80\n"
	if err := os.WriteFile(filepath.Join(warnOnly, "s.yaml"), []byte(svc), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int // 0 or 1
		wantOut  string
	}{
		{name: "valid examples", args: []string{"../../examples"}, wantCode: 0},
		{name: "broken overlay", args: []string{"../../examples", "../../examples-broken"}, wantCode: 1, wantOut: "error: ../../examples-broken/team-b-ingress.yaml: Ingress/team-b/team-b: spec.rules[0].http.paths[0].backend.service.name: service team-b/team-b-app not found"},
		{name: "warning passes", args: []string{warnOnly}, wantCode: 0, wantOut: "spec.colour: unknown field"},
		{name: "warning fails with --strict", args: []string{"--strict", warnOnly}, wantCode: 1, wantOut: "spec.colour"},
		{name: "json", args: []string{"-o", "json", "../../examples", "../../examples-broken"}, wantCode: 1, wantOut: `"field": "spec.rules[0].http.paths[0].backend.service.name"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newValidateCommand()
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			code := 0
			if err != nil {
				code = exitCode(err)
				var vf validateFailed
				if !errors.As(err, &vf) {
					t.Fatalf("unexpected error: %v", err)
				}
			}
			if code != tt.wantCode || !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("exit %d, output:\n%s\nwant exit %d and %q", code, out.String(), tt.wantCode, tt.wantOut)
			}
			if strings.Contains(strings.Join(tt.args, " "), "json") {
				var ps []model.Problem
				if err := json.Unmarshal(out.Bytes(), &ps); err != nil || len(ps) == 0 {
					t.Fatalf("json output: %v %q", err, out.String())
				}
			}
		})
	}
	if err := newValidateCommandWithArgs("-o", "yaml", "../../examples"); err == nil {
		t.Fatalf("-o yaml accepted")
	}
}

func newValidateCommandWithArgs(args ...string) error {
	cmd := newValidateCommand()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs(args)
	return cmd.Execute()
}
