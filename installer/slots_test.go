package installer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/revisions"
)

// slotFiles reads both slots' manifests ("" when absent).
func slotFiles(t *testing.T, l revisions.Layout) map[revisions.Slot]string {
	t.Helper()
	out := map[revisions.Slot]string{}
	for _, s := range revisions.Slots {
		data, err := os.ReadFile(l.PublishedSlotManifest(s))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[s] = string(data)
	}
	return out
}

// TestPublishSlots installs revisions one after another in slots mode: each
// goes into the slot the serving revision (the last-known-good one, else the
// lowest) does not hold, and the serving slot's manifest is never touched.
func TestPublishSlots(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	f := revisions.OS()
	for _, step := range []struct {
		name string
		// lkg is set before the install (0: left as it is).
		lkg  int
		slot revisions.Slot
	}{
		{"the first revision takes slot a", 0, revisions.SlotA},
		{"the next one goes beside the last-known-good one", 1, revisions.SlotB},
		{"a candidate not judged yet is replaced", 0, revisions.SlotB},
		{"a good candidate whose old slot was not removed yet serves", 3, revisions.SlotA},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.lkg > 0 {
				if err := l.SetLastKnownGood(f, step.lkg); err != nil {
					t.Fatal(err)
				}
			}
			before := slotFiles(t, l)
			in := newInstaller(l, src)
			in.NewUID = revisions.NewUID
			res, err := in.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Slot != step.slot || res.PodName != l.SlotPodName(step.slot) {
				t.Fatalf("published into slot %q as pod %q, want slot %s", res.Slot, res.PodName, step.slot)
			}
			after := slotFiles(t, l)
			if other := step.slot.Other(); after[other] != before[other] {
				t.Fatalf("slot %s changed:\n%s\nwas:\n%s", other, after[other], before[other])
			}
			if after[step.slot] == before[step.slot] {
				t.Fatalf("slot %s unchanged", step.slot)
			}
			published, err := installertest.Check(l, exampleFiles)
			if err != nil || published != res.Revision {
				t.Fatalf("published %d of %d: %v", published, res.Revision, err)
			}
			slots, err := l.PublishedSlots(f)
			if err != nil {
				t.Fatal(err)
			}
			uids := map[string]bool{}
			for _, s := range slots {
				if !s.Labeled || s.UID == "" || uids[s.UID] {
					t.Fatalf("slot %s: labeled %v uid %q (seen %v)", s.Slot, s.Labeled, s.UID, uids)
				}
				uids[s.UID] = true
			}
			monitor, err := os.ReadFile(l.PublishedMonitorManifest())
			if err != nil || !bytes.Contains(monitor, []byte("--publish=slots")) {
				t.Fatalf("monitor manifest does not tell its publish mode: %v\n%s", err, monitor)
			}
		})
	}
}

// TestPublishReplaceKeepsTheSingleManifest: in replace mode every revision
// is published over <t>-pod.yaml exactly as rendered, byte for byte what
// the installer has always written (the golden files of TestRenderGolden),
// and nothing else appears in the manifests dir.
func TestPublishReplaceKeepsTheSingleManifest(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	for rev := 1; rev <= 2; rev++ {
		in := newInstaller(l, src)
		in.Render.Publish = revisions.PublishReplace
		res, err := in.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision != rev || res.Slot != "" || res.PodName != l.Target {
			t.Fatalf("result %+v", res)
		}
		opts := installer.RenderOptions{Binary: "/usr/bin/revgate", Publish: revisions.PublishReplace}
		for _, m := range []struct {
			path string
			want func() ([]byte, error)
		}{
			{l.PublishedPodManifest(), func() ([]byte, error) {
				return installer.Marshal(installer.OperandPod(l, rev, opts, installedAt))
			}},
			{l.PublishedMonitorManifest(), func() ([]byte, error) {
				return installer.Marshal(installer.MonitorPod(l, rev, opts, installedAt))
			}},
		} {
			got, err := os.ReadFile(m.path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.want()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s:\n%s\nwant:\n%s", m.path, got, want)
			}
			if strings.Contains(string(got), "--publish") || strings.Contains(string(got), revisions.SlotLabel) {
				t.Fatalf("%s mentions the slots:\n%s", m.path, got)
			}
		}
		if _, err := os.Stat(l.PublishedSlotManifest(revisions.SlotB)); !os.IsNotExist(err) {
			t.Fatalf("slot b published in replace mode: %v", err)
		}
		if published, err := installertest.Check(l, exampleFiles); err != nil || published != rev {
			t.Fatalf("published %d: %v", published, err)
		}
	}
}

type podEventRecorder struct{ pods, msgs []string }

func (r *podEventRecorder) EmitFor(_ context.Context, pod, _, _, msg string) error {
	r.pods, r.msgs = append(r.pods, pod), append(r.msgs, msg)
	return nil
}

// TestInstallEventOnTheSlotsPod: the install Event goes on the mirror pod
// of the static pod that runs the revision.
func TestInstallEventOnTheSlotsPod(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	rec := &podEventRecorder{}
	for range 2 {
		in := newInstaller(l, src)
		in.PodEvents = rec
		if _, err := in.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := l.SetLastKnownGood(revisions.OS(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"gw", "gw-b"}; strings.Join(rec.pods, " ") != strings.Join(want, " ") {
		t.Fatalf("events on %v, want %v", rec.pods, want)
	}
	if !strings.Contains(rec.msgs[1], "slot b") {
		t.Fatalf("event message %q does not name the slot", rec.msgs[1])
	}
}

// TestPublishSlotsRefusesAnotherTargetsManifest: target gw-b's operand
// manifest has the names of slot b of target gw; publishing there is
// refused with both names, and nothing is published.
func TestPublishSlotsRefusesAnotherTargetsManifest(t *testing.T) {
	l := installertest.TempLayout(t)
	src := &installer.LocalSource{Dir: installertest.SourceDir(t, exampleSource)}
	if _, err := newInstaller(l, src).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := l
	other.Target = "gw-b"
	in := newInstaller(other, src)
	in.Render.Publish = revisions.PublishReplace
	if _, err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := slotFiles(t, l)
	_, err := newInstaller(l, src).Run(context.Background())
	if !errors.Is(err, revisions.ErrForeignManifest) || !strings.Contains(err.Error(), `"gw-b"`) {
		t.Fatalf("install beside target gw-b: %v", err)
	}
	if after := slotFiles(t, l); after[revisions.SlotA] != before[revisions.SlotA] || after[revisions.SlotB] != before[revisions.SlotB] {
		t.Fatal("a refused install changed a slot")
	}
}
