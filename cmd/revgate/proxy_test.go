package main

import (
	"bytes"
	"context"
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
			o.AddFlags(cmd.Flags())
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
			if e := o.serverOptions().Endpoints; e.File != tt.file || e.RelistPeriod != server.DefaultEndpointsRelistPeriod {
				t.Fatalf("endpoints options %+v", e)
			}
		})
	}
}

// Regression: --http-addr equal to --admin-addr bound both through
// SO_REUSEPORT and mixed traffic with admin answers; it is now a failure
// exit with an exit record, so a startup monitor sees a crash loop.
func TestProxyRefusesSharedListenerAddress(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "termination.log")
	o := &proxyOptions{}
	cmd := &cobra.Command{}
	o.AddFlags(cmd.Flags())
	if err := cmd.Flags().Parse([]string{"--config-dir=../../examples", "--revision=4", "--termination-log=" + path,
		"--http-addr=127.0.0.1:0", "--https-addr=127.0.0.1:19901", "--admin-addr=127.0.0.1:19901"}); err != nil {
		t.Fatal(err)
	}
	err := o.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `--https-addr "127.0.0.1:19901" and --admin-addr "127.0.0.1:19901"`) {
		t.Fatalf("run error = %v", err)
	}
	recs, rerr := revisions.ReadTerminationRecords(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(recs) != 2 || recs[0].Type != revisions.RecordStart || recs[1].Type != revisions.RecordExit ||
		!strings.Contains(recs[1].Error, "same listening address") || recs[1].Revision != 4 {
		t.Fatalf("records = %+v", recs)
	}
}

func TestValidateAndInstallRefuseSharedListenerAddress(t *testing.T) {
	t.Run("validate", func(t *testing.T) {
		cmd := newValidateCommand()
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs([]string{"--http-addr=:9901", "../../examples"})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `--http-addr ":9901" and --admin-addr "127.0.0.1:9901"`) {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("install", func(t *testing.T) {
		o := &installOptions{}
		cmd := &cobra.Command{}
		o.AddFlags(cmd.Flags())
		if err := cmd.Flags().Parse([]string{"--source-dir=x", "--proxy-arg=--admin-addr=0.0.0.0:8080"}); err != nil {
			t.Fatal(err)
		}
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), `--proxy-arg: --http-addr ":8080" and --admin-addr "0.0.0.0:8080"`) {
			t.Fatalf("error = %v", err)
		}
	})
}
