package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

func TestProcessRecords(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	t.Run("failure to load leaves start and exit records", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "log", "termination.log")
		clk := newFakeClock()
		err := Process{
			TerminationLog: logPath, Revision: 9, Logger: quiet, Server: Options{Clock: clk},
			Load: func() (*model.Snapshot, error) { return nil, errors.New("read configuration folder: missing") },
		}.Run(context.Background())
		if err == nil {
			t.Fatal("run succeeded with a configuration that cannot load")
		}
		recs, rerr := revisions.ReadTerminationRecords(logPath)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if len(recs) != 2 || recs[0].Type != revisions.RecordStart || recs[0].Revision != 9 || recs[0].PID == 0 ||
			recs[1].Type != revisions.RecordExit || recs[1].ExitCode != 1 || recs[1].Error != err.Error() {
			t.Fatalf("records %+v", recs)
		}
		for _, r := range recs {
			if !r.Time.Equal(clk.Now()) {
				t.Fatalf("%s record at %s, want the gateway's clock's %s", r.Type, r.Time, clk.Now())
			}
		}
	})
	t.Run("clean shutdown leaves only the start record", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "termination.log")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		n := &recordingNotifier{}
		go func() {
			done <- Process{
				TerminationLog: logPath, Revision: 4, Logger: quiet,
				Load:   func() (*model.Snapshot, error) { return newSnapshot().s, nil },
				Server: Options{HTTPAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", ShutdownDelay: -1, Notifier: n},
			}.Run(ctx)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for n.all() == "" && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
		recs, _ := revisions.ReadTerminationRecords(logPath)
		if len(recs) != 1 || recs[0].Type != revisions.RecordStart || recs[0].Revision != 4 {
			t.Fatalf("records %+v", recs)
		}
	})
	t.Run("a port in use is a failure exit", func(t *testing.T) {
		// A listener without SO_REUSEPORT blocks the bind.
		logPath := filepath.Join(t.TempDir(), "termination.log")
		blocker, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer blocker.Close()
		err = Process{
			TerminationLog: logPath, Revision: 2, Logger: quiet,
			Load:   func() (*model.Snapshot, error) { return newSnapshot().s, nil },
			Server: Options{HTTPAddr: blocker.Addr().String(), ShutdownDelay: -1},
		}.Run(context.Background())
		if err == nil {
			t.Fatal("bound a port held by another socket without SO_REUSEPORT")
		}
		recs, _ := revisions.ReadTerminationRecords(logPath)
		if len(recs) != 2 || recs[1].Type != revisions.RecordExit {
			t.Fatalf("records %+v", recs)
		}
	})
}
