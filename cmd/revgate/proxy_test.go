package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/revgate/revgate/proxy/server"
	"github.com/revgate/revgate/revisions"
)

// Regression: a proxy whose flags did not parse left no start record, so the
// monitor read a crash loop from bad flags as NeverStartedUp.
func TestFlagErrorLeavesStartAndExitRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log", "termination.log")
	flagErr := errors.New("unknown flag: --no-such-flag")
	err := recordFlagError([]string{"proxy", "--revision=7", "--termination-log", path, "--no-such-flag"}, flagErr)
	if !errors.Is(err, flagErr) {
		t.Fatalf("error = %v, want the flag error", err)
	}
	recs, err := revisions.ReadTerminationRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Type != revisions.RecordStart || recs[1].Type != revisions.RecordExit ||
		recs[0].Revision != 7 || recs[1].Error != flagErr.Error() || recs[1].ExitCode == 0 {
		t.Fatalf("records = %+v", recs)
	}
}

func TestProxyEndpointsFlags(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		file    string
		wantErr string
	}{
		{name: "off by default", args: nil},
		{name: "a file", args: []string{"--endpoints-file=/srv/res/revgate-live/endpoints.json"}, file: "/srv/res/revgate-live/endpoints.json"},
		{name: "no relist period", args: []string{"--endpoints-file=/x/endpoints.json", "--endpoints-relist-period=0s"}, wantErr: "--endpoints-relist-period"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := &proxyOptions{}
			cmd := &cobra.Command{}
			o.addFlags(cmd)
			if err := cmd.Flags().Parse(append([]string{"--config-dir=/x"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.server.Endpoints.File != tt.file || o.server.Endpoints.RelistPeriod != server.DefaultEndpointsRelistPeriod {
				t.Fatalf("endpoints options %+v", o.server.Endpoints)
			}
		})
	}
}
