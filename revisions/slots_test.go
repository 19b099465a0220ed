package revisions_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/revisions"
)

func TestSlotNames(t *testing.T) {
	l := revisions.Layout{Target: "gw", ManifestsDir: "/m"}.Defaulted()
	for _, tt := range []struct {
		slot      revisions.Slot
		pod, file string
	}{
		{revisions.SlotA, "gw", "/m/gw-pod.yaml"},
		{revisions.SlotB, "gw-b", "/m/gw-b-pod.yaml"},
	} {
		t.Run(string(tt.slot), func(t *testing.T) {
			if got := l.SlotPodName(tt.slot); got != tt.pod {
				t.Errorf("pod name %q, want %q", got, tt.pod)
			}
			if got := l.PublishedSlotManifest(tt.slot); got != tt.file {
				t.Errorf("manifest %q, want %q", got, tt.file)
			}
			if tt.slot.Other().Other() != tt.slot || tt.slot.Other() == tt.slot {
				t.Errorf("Other of %s is %s", tt.slot, tt.slot.Other())
			}
		})
	}
	// Slot a keeps the replace mode's manifest, so an upgraded node finds
	// its serving pod in slot a.
	if l.PublishedSlotManifest(revisions.SlotA) != l.PublishedPodManifest() {
		t.Error("slot a is not the replace mode's manifest")
	}
}

func TestParsePublishMode(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want revisions.PublishMode
		err  bool
	}{
		{"slots", revisions.PublishSlots, false},
		{"replace", revisions.PublishReplace, false},
		{"", "", true},
		{"Slots", "", true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := revisions.ParsePublishMode(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("ParsePublishMode(%q) = %q, %v", tt.in, got, err)
			}
		})
	}
}

const operandManifest = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    revgate.io/installed-at: "2026-11-22T00:30:00Z"
  labels:
    app: gw
    revision: "7"
  name: gw
  namespace: kube-system
spec:
  containers:
  - command:
    - /usr/bin/revgate
    - proxy
    name: proxy
  hostNetwork: true
  someFieldThisPackageDoesNotKnow: kept
`

func TestSlotManifest(t *testing.T) {
	l := revisions.Layout{Target: "gw"}.Defaulted()
	out, err := l.SlotManifest([]byte(operandManifest), revisions.SlotB, "0b9f5c32-5d1e-4c1a-9a43-3f2f7f1f8e10")
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(operandManifest), &want); err != nil {
		t.Fatal(err)
	}
	meta := want["metadata"].(map[string]any)
	meta["name"] = "gw-b"
	meta["uid"] = "0b9f5c32-5d1e-4c1a-9a43-3f2f7f1f8e10"
	meta["labels"].(map[string]any)[revisions.SlotLabel] = "b"
	gotY, _ := yaml.Marshal(got)
	wantY, _ := yaml.Marshal(want)
	if string(gotY) != string(wantY) {
		t.Fatalf("slot manifest:\n%s\nwant:\n%s", gotY, wantY)
	}
	if n, err := revisions.RevisionLabelOf(out, "slot"); err != nil || n != 7 {
		t.Fatalf("revision label %d %v", n, err)
	}

	for _, bad := range []string{"metadata: [", "", "metadata: 3\n", "metadata:\n  labels: [a]\n"} {
		if _, err := l.SlotManifest([]byte(bad), revisions.SlotA, "u"); err == nil {
			t.Errorf("SlotManifest(%q) did not fail", bad)
		}
	}
}

func TestPublishedSlotsAndServingSlot(t *testing.T) {
	l := revisions.Layout{Target: "gw", ManifestsDir: t.TempDir()}.Defaulted()
	f := revisions.OS()
	publish := func(s revisions.Slot, rev string) {
		t.Helper()
		data := strings.ReplaceAll(operandManifest, `revision: "7"`, `revision: "`+rev+`"`)
		out, err := l.SlotManifest([]byte(data), s, revisions.NewUID())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(l.PublishedSlotManifest(s), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slots, err := l.PublishedSlots(f)
	if err != nil || len(slots) != 0 {
		t.Fatalf("empty manifests dir: %v %v", slots, err)
	}
	if _, err := l.NewestPublishedRevision(f); !errors.Is(err, revisions.ErrNoManifest) {
		t.Fatalf("newest published revision of an empty node: %v", err)
	}
	if s := revisions.FreeSlot(nil, 0); s != revisions.SlotA {
		t.Fatalf("free slot of an empty node %s, want a", s)
	}

	publish(revisions.SlotA, "3")
	publish(revisions.SlotB, "4")
	slots, err = l.PublishedSlots(f)
	if err != nil || len(slots) != 2 {
		t.Fatalf("slots %v %v", slots, err)
	}
	for _, s := range slots {
		if s.Err != nil || !s.Labeled || s.UID == "" || s.Path != l.PublishedSlotManifest(s.Slot) {
			t.Fatalf("slot %+v", s)
		}
	}
	if n, err := l.NewestPublishedRevision(f); err != nil || n != 4 {
		t.Fatalf("newest published revision %d, %v; want 4", n, err)
	}
	for _, tt := range []struct {
		name    string
		lkg     int
		serving revisions.Slot
	}{
		{"the last-known-good revision serves", 4, revisions.SlotB},
		{"else the lowest revision", 0, revisions.SlotA},
		{"a last-known-good revision in no slot", 2, revisions.SlotA},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := revisions.ServingSlot(slots, tt.lkg); got == nil || got.Slot != tt.serving {
				t.Fatalf("serving %+v, want slot %s", got, tt.serving)
			}
			if got := revisions.FreeSlot(slots, tt.lkg); got != tt.serving.Other() {
				t.Fatalf("free %s, want %s", got, tt.serving.Other())
			}
		})
	}

	// A manifest that does not parse is read, with its bytes, and serves
	// only when alone.
	if err := os.WriteFile(l.PublishedSlotManifest(revisions.SlotA), []byte("metadata: ["), 0o644); err != nil {
		t.Fatal(err)
	}
	slots, err = l.PublishedSlots(f)
	if err != nil || len(slots) != 2 || slots[0].Err == nil || string(slots[0].Data) != "metadata: [" {
		t.Fatalf("slots %+v %v", slots, err)
	}
	if got := revisions.ServingSlot(slots, 0); got.Slot != revisions.SlotB {
		t.Fatalf("serving %s, want the slot whose revision is known", got.Slot)
	}
	if got := revisions.ServingSlot(slots[:1], 0); got.Slot != revisions.SlotA {
		t.Fatalf("serving %s, want the only slot", got.Slot)
	}

	// A slot that cannot be read is an error, not an absent slot.
	bad := f
	bad.ReadFile = func(name string) ([]byte, error) {
		if filepath.Base(name) == l.SlotManifestName(revisions.SlotB) {
			return nil, os.ErrPermission
		}
		return os.ReadFile(name)
	}
	if _, err := l.PublishedSlots(bad); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("unreadable slot: %v", err)
	}

	// Target gw-b's operand manifest has the names of gw's slot b.
	other := revisions.Layout{Target: "gw-b", ManifestsDir: l.ManifestsDir}.Defaulted()
	data := strings.ReplaceAll(operandManifest, "app: gw", "app: gw-b")
	if err := os.WriteFile(other.PublishedSlotManifest(revisions.SlotA), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	slots, err = l.PublishedSlots(f)
	if err != nil || len(slots) != 1 || slots[0].Slot != revisions.SlotA {
		t.Fatalf("another target's manifest in slot b is read as gw's: %+v %v", slots, err)
	}
	if err := l.CheckSlotFree(f, revisions.SlotB); !errors.Is(err, revisions.ErrForeignManifest) || !strings.Contains(err.Error(), "gw-b-pod.yaml") {
		t.Fatalf("another target's manifest in slot b: %v", err)
	}
	if err := l.CheckSlotFree(f, revisions.SlotA); err != nil {
		t.Fatalf("slot a: %v", err)
	}
}

func TestNewUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		u := revisions.NewUID()
		if !re.MatchString(u) || seen[u] {
			t.Fatalf("uid %q: not a fresh version 4 UUID", u)
		}
		seen[u] = true
	}
}
