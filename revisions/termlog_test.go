package revisions_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/revgate/revgate/revisions"
)

func TestTerminationLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log", "termination.log")
	if recs, err := revisions.ReadTerminationRecords(path); err != nil || recs != nil {
		t.Fatalf("missing log: %v %v", recs, err)
	}
	// Records without a time get the clock's, in UTC; a time given is kept.
	started := time.Date(2026, 1, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	clk := clocktesting.NewFakePassiveClock(started)
	exitAt := started.Add(time.Minute).UTC()
	var wg sync.WaitGroup
	for pid := 1; pid <= 20; pid++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := revisions.AppendTerminationRecord(path, clk, revisions.TerminationRecord{Type: revisions.RecordStart, Revision: 3, PID: pid}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := revisions.AppendTerminationRecord(path, clk, revisions.TerminationRecord{Type: revisions.RecordExit, Revision: 3, PID: 7, Error: "bind: address in use", ExitCode: 1, Time: exitAt}); err != nil {
		t.Fatal(err)
	}
	// A torn last line and foreign text are skipped.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("panic: something\n{\"type\":\"start\",\"revis"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	recs, err := revisions.ReadTerminationRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 21 {
		t.Fatalf("%d records, want 21", len(recs))
	}
	pids := map[int]bool{}
	for _, r := range recs[:20] {
		if r.Type != revisions.RecordStart || r.Revision != 3 || !r.Time.Equal(started) || r.Time.Location() != time.UTC {
			t.Fatalf("record %+v", r)
		}
		pids[r.PID] = true
	}
	if len(pids) != 20 {
		t.Fatalf("interleaved or lost records: %d distinct pids", len(pids))
	}
	if last := recs[20]; last.Type != revisions.RecordExit || last.ExitCode != 1 || last.Error != "bind: address in use" || !last.Time.Equal(exitAt) {
		t.Fatalf("exit record %+v", last)
	}
}
