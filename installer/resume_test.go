package installer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/revisions"
)

// PublishWritten publishes the highest revision that an install wrote and
// recorded but did not publish (killed in between, or --no-publish), as it
// is on disk, and refuses any other revision.
func TestPublishWritten(t *testing.T) {
	for _, publish := range []revisions.PublishMode{revisions.PublishSlots, revisions.PublishReplace} {
		t.Run(string(publish), func(t *testing.T) {
			l := installertest.TempLayout(t)
			src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
			newIn := func() *installer.Installer {
				in := newInstaller(l, src)
				in.Render.Publish = publish
				return in
			}
			ctx := context.Background()
			if _, err := newIn().Run(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Defaulted().SetLastKnownGood(revisions.OS(), 1); err != nil {
				t.Fatal(err)
			}
			// Revision 2 dies after its state is recorded, before anything is
			// published.
			in := newIn()
			in.AfterStep = func(step string) {
				if step == "state-written" {
					panic("killed")
				}
			}
			func() {
				defer func() { _ = recover() }()
				_, _ = in.Run(ctx)
			}()
			if n, err := installertest.Check(l, exampleFiles); err != nil || n != 1 {
				t.Fatalf("after the interrupted install: published %d (%v), want 1", n, err)
			}

			var seen []int
			in = newIn()
			in.Precondition = func(h int) error { seen = append(seen, h); return nil }
			ev := &eventRecorder{}
			in.Events = ev
			res, err := in.PublishWritten(ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Published || res.Revision != 2 || len(seen) != 1 || seen[0] != 2 {
				t.Fatalf("result %+v, precondition saw %v", res, seen)
			}
			if publish == revisions.PublishSlots && res.Slot != revisions.SlotB {
				t.Fatalf("published into slot %q, want b beside the serving revision", res.Slot)
			}
			if n, err := installertest.Check(l, exampleFiles); err != nil || n != 2 {
				t.Fatalf("published %d (%v), want 2", n, err)
			}
			if len(ev.events) != 1 {
				t.Fatalf("events %v, want one", ev.events)
			}
			state, err := revisions.LoadState(revisions.OS(), l.Defaulted().StateFile())
			if err != nil {
				t.Fatal(err)
			}
			if rs := state.Revisions[2]; rs == nil || rs.Outcome != revisions.OutcomeInstalled || rs.Attempts != 1 {
				t.Fatalf("state of revision 2: %+v", rs)
			}

			// Published already, not the highest, or refused by the
			// precondition: nothing changes.
			if _, err := newIn().PublishWritten(ctx, 2); !errors.Is(err, installer.ErrNotWrittenUnpublished) {
				t.Fatalf("publishing a published revision again: %v", err)
			}
			if _, err := newIn().PublishWritten(ctx, 1); !errors.Is(err, installer.ErrNotWrittenUnpublished) {
				t.Fatalf("publishing a lower revision: %v", err)
			}
			in = newIn()
			in.NoPublish = true
			if _, err := in.Run(ctx); err != nil {
				t.Fatal(err)
			}
			stop := errors.New("stop")
			in = newIn()
			in.Precondition = func(int) error { return stop }
			if _, err := in.PublishWritten(ctx, 3); !errors.Is(err, stop) {
				t.Fatalf("precondition error not returned: %v", err)
			}
			if n, err := installertest.Check(l, exampleFiles); err != nil || n != 2 {
				t.Fatalf("published %d (%v), want 2 still", n, err)
			}
			// A --no-publish revision is published with its first attempt.
			if _, err := newIn().PublishWritten(ctx, 3); err != nil {
				t.Fatal(err)
			}
			if n, err := installertest.Check(l, exampleFiles); err != nil || n != 3 {
				t.Fatalf("published %d (%v), want 3", n, err)
			}
			state, err = revisions.LoadState(revisions.OS(), l.Defaulted().StateFile())
			if err != nil {
				t.Fatal(err)
			}
			if rs := state.Revisions[3]; rs == nil || rs.Attempts != 1 {
				t.Fatalf("state of revision 3: %+v", rs)
			}
		})
	}
}
