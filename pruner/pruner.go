// Package pruner removes old revisions of a target, keeping the newest ones
// and never the protected ones: the last-known-good revision, the revisions
// of the published operand manifests (in either slot) and monitor manifest,
// and any revision awaiting a retry.
package pruner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/revgate/revgate/revisions"
)

// DefaultKeep is how many of the newest revisions are kept.
const DefaultKeep = 3

// Pruner removes old revisions. Zero values of optional fields take their defaults.
type Pruner struct {
	// Layout of the target (Defaulted is applied).
	Layout revisions.Layout
	// FS is the file-system seam; default revisions.OS().
	FS revisions.FS
	// Keep is how many of the newest revisions are kept; 0 keeps only the
	// protected ones (the command's --keep defaults to DefaultKeep).
	Keep int
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
	// LockTimeout bounds the wait for the lock; default revisions.DefaultLockTimeout.
	LockTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Result says what a prune did (or, with DryRun, would do).
type Result struct {
	// Removed revisions, ascending.
	Removed []int
	// Kept revisions, ascending, with why each was kept.
	Kept map[int]string
	// Ignored names that look like revision folders but do not parse.
	Ignored []string
}

// Run prunes under the lock.
func (p *Pruner) Run(ctx context.Context) (*Result, error) {
	p.Layout = p.Layout.Defaulted()
	if err := p.Layout.Validate(); err != nil {
		return nil, err
	}
	if p.Keep < 0 {
		return nil, fmt.Errorf("invalid keep %d", p.Keep)
	}
	if p.FS.OpenFile == nil {
		p.FS = revisions.OS()
	}
	if p.LockTimeout == 0 {
		p.LockTimeout = revisions.DefaultLockTimeout
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	log := p.Logger.With("component", "pruner", "target", p.Layout.Target)

	lock, err := revisions.AcquireLock(ctx, p.Layout.LockFile, p.LockTimeout)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()

	l, f := p.Layout, p.FS
	if !p.DryRun {
		if err := f.RemoveStale(l.ResourceDir); err != nil {
			return nil, err
		}
	}
	listing, err := l.List(f)
	if err != nil {
		return nil, err
	}
	for _, name := range listing.Ignored {
		log.Warn("leaving alone a folder whose name is not a revision", "name", name)
	}
	kept, err := p.protected(listing)
	if err != nil {
		return nil, err
	}
	res := &Result{Kept: kept, Ignored: listing.Ignored}
	for _, n := range listing.Revisions {
		if _, ok := kept[n]; ok {
			continue
		}
		res.Removed = append(res.Removed, n)
	}
	for _, n := range res.Removed {
		if p.DryRun {
			log.Info("would remove revision", "revision", n)
			continue
		}
		if err := f.RemoveDir(l.RevisionDir(n)); err != nil {
			return nil, fmt.Errorf("remove revision %d: %w", n, err)
		}
		log.Info("removed revision", "revision", n)
	}
	if p.DryRun {
		return res, nil
	}
	// Forget every revision that is no longer on disk, including those a
	// prune that died after removing them could not forget.
	removed := map[int]bool{}
	for _, n := range res.Removed {
		removed[n] = true
	}
	onDisk := func(n int) bool { return listing.Has(n) && !removed[n] }
	state, err := revisions.LoadState(f, l.StateFile())
	if err != nil {
		return nil, err
	}
	stale := false
	for n := range state.Revisions {
		stale = stale || !onDisk(n)
	}
	if !stale {
		return res, nil
	}
	state.Forget(onDisk)
	if err := revisions.SaveState(f, l.StateFile(), state); err != nil {
		return nil, fmt.Errorf("forget removed revisions: %w", err)
	}
	return res, nil
}

// protected returns the revisions that must stay, each with why. When it
// cannot tell whether a revision is protected (an unreadable link, manifest or
// state file) it fails rather than guess.
func (p *Pruner) protected(listing revisions.Listing) (map[int]string, error) {
	l, f := p.Layout, p.FS
	kept := map[int]string{}
	newest := append([]int(nil), listing.Revisions...)
	sort.Sort(sort.Reverse(sort.IntSlice(newest)))
	for i, n := range newest {
		if i < p.Keep {
			kept[n] = "newest"
		}
	}
	if n, err := l.LastKnownGood(f); err == nil {
		kept[n] = "last-known-good"
	} else if !errors.Is(err, revisions.ErrNoLastKnownGood) {
		return nil, fmt.Errorf("cannot tell the last-known-good revision, pruning nothing: %w", err)
	}
	// Both publish modes: the operand manifest of replace mode is slot a's.
	slots, err := l.PublishedSlots(f)
	if err != nil {
		return nil, fmt.Errorf("cannot tell the published revisions, pruning nothing: %w", err)
	}
	for _, s := range slots {
		if s.Err != nil {
			return nil, fmt.Errorf("cannot tell the revision of the operand manifest published in %s, pruning nothing: %w", s.Path, s.Err)
		}
		kept[s.Revision] = "published operand manifest"
		if s.Labeled {
			kept[s.Revision] += " (slot " + string(s.Slot) + ")"
		}
	}
	n, err := revisions.ReadRevisionLabel(f, l.PublishedMonitorManifest())
	switch {
	case errors.Is(err, revisions.ErrNoManifest):
	case err != nil:
		return nil, fmt.Errorf("cannot tell the revision of the published monitor manifest, pruning nothing: %w", err)
	default:
		kept[n] = "published monitor manifest"
	}
	state, err := revisions.LoadState(f, l.StateFile())
	if err != nil {
		return nil, fmt.Errorf("cannot read the retry state, pruning nothing: %w", err)
	}
	for _, n := range state.PendingRetries() {
		kept[n] = "pending retry"
	}
	return kept, nil
}
