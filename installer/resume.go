package installer

import (
	"context"
	"errors"
	"fmt"

	"github.com/revgate/revgate/revisions"
)

// ErrNotWrittenUnpublished is returned by PublishWritten for a revision that
// is not the highest one, written whole and never published.
var ErrNotWrittenUnpublished = errors.New("not a written, unpublished revision")

// PublishWritten publishes revision n as it is on disk: the revision an
// install wrote whole and recorded, and then did not publish (it was killed
// in between, or ran with NoPublish). The pods keep the install time they
// were rendered with. Under the lock, n must still be the highest revision,
// recorded as installed, with neither manifest published; Precondition,
// when set, is checked first. Source, Validator, Revision and NoPublish are
// not used; the Event says the revision was published.
func (in *Installer) PublishWritten(ctx context.Context, n int) (*Result, error) {
	in.defaults()
	if err := in.Layout.Validate(); err != nil {
		return nil, err
	}
	if in.Render.Publish == "" {
		in.Render.Publish = revisions.DefaultPublishMode
	}
	if _, err := revisions.ParsePublishMode(string(in.Render.Publish)); err != nil {
		return nil, err
	}
	lock, err := revisions.AcquireLock(ctx, in.Layout.LockFile, in.LockTimeout)
	if err != nil {
		return nil, err
	}
	res, err := in.publishWritten(n)
	lock.Unlock()
	if err != nil {
		return nil, err
	}
	in.recordEvent(ctx, res, "written earlier")
	return res, nil
}

// publishWritten is PublishWritten's critical section; the lock is held.
func (in *Installer) publishWritten(n int) (*Result, error) {
	l, f := in.Layout, in.FS
	listing, err := l.List(f)
	if err != nil {
		return nil, err
	}
	if in.Precondition != nil {
		if err := in.Precondition(listing.Highest()); err != nil {
			return nil, err
		}
	}
	if h := listing.Highest(); n != h {
		return nil, fmt.Errorf("publish revision %d: the highest revision is %d: %w", n, h, ErrNotWrittenUnpublished)
	}
	state, err := revisions.LoadState(f, l.StateFile())
	if err != nil {
		return nil, err
	}
	rs := state.Revisions[n]
	if rs == nil || rs.Outcome != revisions.OutcomeInstalled {
		return nil, fmt.Errorf("publish revision %d: it is not recorded as installed and undecided: %w", n, ErrNotWrittenUnpublished)
	}
	published := []string{l.PublishedMonitorManifest()}
	for _, s := range revisions.Slots {
		published = append(published, l.PublishedSlotManifest(s))
	}
	for _, p := range published {
		if r, err := revisions.ReadRevisionLabel(f, p); err == nil && r == n {
			return nil, fmt.Errorf("publish revision %d: %s holds it already: %w", n, p, ErrNotWrittenUnpublished)
		}
	}
	monitor, err := f.ReadFile(l.RevisionMonitorManifest(n))
	if err != nil {
		return nil, fmt.Errorf("publish revision %d: %w", n, err)
	}
	pod, err := f.ReadFile(l.RevisionPodManifest(n))
	if err != nil {
		return nil, fmt.Errorf("publish revision %d: %w", n, err)
	}
	for _, m := range []struct {
		path string
		data []byte
	}{{l.RevisionMonitorManifest(n), monitor}, {l.RevisionPodManifest(n), pod}} {
		if r, err := revisions.RevisionLabelOf(m.data, m.path); err != nil {
			return nil, fmt.Errorf("publish revision %d: %w", n, err)
		} else if r != n {
			return nil, fmt.Errorf("publish revision %d: %s names revision %d", n, m.path, r)
		}
	}
	if rs.Attempts == 0 {
		rs.Attempts = 1
		if err := revisions.SaveState(f, l.StateFile(), state); err != nil {
			return nil, fmt.Errorf("record revision %d: %w", n, err)
		}
	}
	log := in.log.With("revision", n)
	res := &Result{Revision: n, Dir: l.RevisionDir(n), PodName: l.Target}
	if err := in.publish(log, n, monitor, pod, res); err != nil {
		return nil, err
	}
	return res, nil
}
