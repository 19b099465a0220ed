package revisions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"
)

// Outcome of a revision as recorded in the state file.
type Outcome string

const (
	// OutcomeInstalled: written by the installer, not decided yet.
	OutcomeInstalled Outcome = "Installed"
	// OutcomeGood: the monitor saw it start, healthy and ready.
	OutcomeGood Outcome = "Good"
	// OutcomeFailed: the monitor fell back from it.
	OutcomeFailed Outcome = "Failed"
	// OutcomeSuperseded: a newer revision was installed before it was decided
	// or retried.
	OutcomeSuperseded Outcome = "Superseded"
)

// Fallback is one fallback from a revision, kept in its history.
type Fallback struct {
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// To is the revision put back (0 when there was none, at bootstrap).
	To int `json:"to"`
	// Attempt is the attempt that failed (1 for the first rollout).
	Attempt int `json:"attempt"`
}

// RevisionState is what is known about one revision.
type RevisionState struct {
	Revision int     `json:"revision"`
	Outcome  Outcome `json:"outcome"`
	// Reason and Message of the last failure (empty when none).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Attempts counts rollouts of this revision (1 after the first).
	Attempts int `json:"attempts"`
	// NextRetry is when the failed revision is published again; nil when no
	// retry is pending.
	NextRetry *time.Time `json:"nextRetry,omitempty"`
	// InstalledAt and DecidedAt are set by the installer and the monitor.
	InstalledAt time.Time `json:"installedAt,omitempty"`
	DecidedAt   time.Time `json:"decidedAt,omitempty"`
	// Fallbacks is the history of fallbacks from this revision, oldest first.
	Fallbacks []Fallback `json:"fallbacks,omitempty"`
}

// State is the retry state file's content.
type State struct {
	// LastKnownGood mirrors the link's revision at the last decision.
	LastKnownGood int `json:"lastKnownGood,omitempty"`
	// Revisions by number.
	Revisions map[int]*RevisionState `json:"revisions"`
}

// Get returns the state of revision n, creating it when missing.
func (s *State) Get(n int) *RevisionState {
	if s.Revisions == nil {
		s.Revisions = map[int]*RevisionState{}
	}
	r, ok := s.Revisions[n]
	if !ok {
		r = &RevisionState{Revision: n}
		s.Revisions[n] = r
	}
	return r
}

// PendingRetries returns the revisions with a pending retry, ascending.
func (s *State) PendingRetries() []int {
	var out []int
	for n, r := range s.Revisions {
		if r.NextRetry != nil {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// Forget drops the state of revisions that no longer exist on disk.
func (s *State) Forget(keep func(n int) bool) {
	for n := range s.Revisions {
		if !keep(n) {
			delete(s.Revisions, n)
		}
	}
}

// LoadState reads the state file; a missing file is an empty state.
func LoadState(f FS, path string) (*State, error) {
	data, err := f.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Revisions: map[int]*RevisionState{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", path, err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse state %s: %w", path, err)
	}
	if s.Revisions == nil {
		s.Revisions = map[int]*RevisionState{}
	}
	return &s, nil
}

// SaveState writes the state file durably (0644: it holds no secrets).
func SaveState(f FS, path string, s *State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	return f.WriteFile(path, append(data, '\n'), 0o644)
}

// UpdateState loads the state, applies fn and saves it. Call it under the lock.
func UpdateState(f FS, path string, fn func(*State) error) error {
	s, err := LoadState(f, path)
	if err != nil {
		return err
	}
	if err := fn(s); err != nil {
		return err
	}
	return SaveState(f, path, s)
}
