package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"k8s.io/utils/clock"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// Process is the life of a `revgate proxy` process: start record, load,
// bind, serve, drain; failures leave an exit record.
type Process struct {
	// TerminationLog is the file records are appended to; "" disables them.
	TerminationLog string
	// Revision is stamped into the records.
	Revision int
	// Load builds the snapshot to serve; an error is a failure exit.
	Load func() (*model.Snapshot, error)
	// Server configures the gateway.
	Server Options
	// Logger logs the process's life; slog.Default() when nil.
	Logger *slog.Logger
}

// Run appends the start record, loads the configuration and serves it until
// ctx is done, then drains. It returns nil after a clean shutdown; any other
// outcome appends an exit record with the error and returns it.
func (p Process) Run(ctx context.Context) (err error) {
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	plog := log.With("component", "proxy")
	pid := p.Server.PID
	if pid == 0 {
		pid = os.Getpid()
	}
	clk := p.Server.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if p.TerminationLog != "" {
		if err := revisions.AppendTerminationRecord(p.TerminationLog, clk, revisions.TerminationRecord{
			Type: revisions.RecordStart, Revision: p.Revision, PID: pid,
		}); err != nil {
			plog.Error("cannot append the start record", "err", err)
		}
		defer func() {
			if err == nil {
				return
			}
			if rerr := revisions.AppendTerminationRecord(p.TerminationLog, clk, revisions.TerminationRecord{
				Type: revisions.RecordExit, Revision: p.Revision, PID: pid, Error: err.Error(), ExitCode: 1,
			}); rerr != nil {
				plog.Error("cannot append the exit record", "err", rerr)
			}
		}()
	}
	snap, err := p.Load()
	if err != nil {
		return fmt.Errorf("load configuration: %w", err)
	}
	plog.Info("configuration loaded", "routes", len(snap.Routes), "backends", len(snap.Backends),
		"certificates", len(snap.Certificates), "errors", len(snap.Errors()), "fallback", snap.Fallback.Status,
		"translation", snap.TranslationDuration)
	for _, pr := range snap.Problems {
		plog.Warn("configuration problem", "severity", pr.Severity, "problem", pr.String())
	}
	so := p.Server
	so.Logger = log
	so.PID = pid
	g := New(snap, so)
	if err := g.Listen(ctx); err != nil {
		return err
	}
	return g.Serve(ctx)
}
