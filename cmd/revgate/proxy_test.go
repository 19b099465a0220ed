package main

import (
	"errors"
	"path/filepath"
	"testing"

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
