package revisions

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/yaml"
)

// PublishMode says how the operand manifest of a new revision reaches the
// manifests dir.
type PublishMode string

const (
	// PublishSlots publishes a new revision beside the serving one, in the
	// other of two pod slots: two static pods with different names run side
	// by side, the new one joins the gateway's ports (SO_REUSEPORT) only once
	// ready, and the losing slot's manifest is removed only after the other
	// serves. A bad revision never interrupts the serving one. The default.
	PublishSlots PublishMode = "slots"
	// PublishReplace publishes every revision over the one operand manifest
	// <t>-pod.yaml, OpenShift's contract byte for byte. Under the kubelet
	// the old pod is stopped before the new one starts: the gateway does not
	// listen for the 10-15 s in between.
	PublishReplace PublishMode = "replace"
)

// DefaultPublishMode is the installer's publish mode.
const DefaultPublishMode = PublishSlots

// ParsePublishMode parses a --publish value.
func ParsePublishMode(s string) (PublishMode, error) {
	switch m := PublishMode(s); m {
	case PublishSlots, PublishReplace:
		return m, nil
	}
	return "", fmt.Errorf("invalid publish mode %q: want %s or %s", s, PublishSlots, PublishReplace)
}

// Slot names one of the two operand pods of the slots publish mode.
type Slot string

const (
	// SlotA is the pod <t> in <manifests-dir>/<t>-pod.yaml: the same names as
	// the replace mode's manifest, which a node upgraded to slots finds in
	// slot a.
	SlotA Slot = "a"
	// SlotB is the pod <t>-b in <manifests-dir>/<t>-b-pod.yaml. A target
	// named <t>-b would have the same names in slot a: two such targets
	// cannot share a manifests dir, and PublishedSlots refuses a manifest
	// labelled as another target's.
	SlotB Slot = "b"
)

// Slots are both slots, in the order they are read.
var Slots = []Slot{SlotA, SlotB}

// Other is the other slot.
func (s Slot) Other() Slot {
	if s == SlotA {
		return SlotB
	}
	return SlotA
}

// SlotLabel is the label of an operand manifest published in a slot; its
// value is the slot ("a" or "b").
const SlotLabel = "revgate.io/slot"

// SlotPodName is the static pod's metadata.name in slot s: <t> or <t>-b.
// The kubelet names its mirror pod <name>-<node>.
func (l Layout) SlotPodName(s Slot) string {
	if s == SlotA {
		return l.Target
	}
	return l.Target + "-" + string(s)
}

// SlotManifestName is the file name of slot s in the manifests dir:
// <t>-pod.yaml or <t>-b-pod.yaml.
func (l Layout) SlotManifestName(s Slot) string { return l.SlotPodName(s) + "-pod.yaml" }

// PublishedSlotManifest is the path of slot s in the manifests dir.
func (l Layout) PublishedSlotManifest(s Slot) string {
	return filepath.Join(l.ManifestsDir, l.SlotManifestName(s))
}

// OperandManifestNames are the file names an operand manifest of the target
// may have in the manifests dir, in either publish mode.
func (l Layout) OperandManifestNames() []string {
	out := make([]string, 0, len(Slots))
	for _, s := range Slots {
		out = append(out, l.SlotManifestName(s))
	}
	return out
}

// PublishedSlot is the operand manifest found in one slot.
type PublishedSlot struct {
	Slot Slot
	// Path of the manifest file.
	Path string
	// Data is the file's content.
	Data []byte
	// Revision is the manifest's revision label; 0 when Err is set.
	Revision int
	// UID is metadata.uid, which a slot manifest carries so that the kubelet
	// keeps the pod running when only its annotations change; empty for a
	// manifest published in replace mode.
	UID string
	// Labeled reports whether the manifest carries the slot label, that is
	// whether it was published in slots mode.
	Labeled bool
	// Annotations of the manifest.
	Annotations map[string]string
	// Err says why the manifest has no usable revision label.
	Err error
}

// AppLabel is the label every manifest of a target carries with the target
// name (the operand's) or <t>-startup-monitor (the monitor's).
const AppLabel = "app"

// ErrForeignManifest is returned when a slot's file holds another target's
// manifest.
var ErrForeignManifest = errors.New("manifest belongs to another target")

// PublishedSlots reads the operand manifests published in the slots, in
// slot order; absent slots are left out. A manifest that does not parse is
// returned with Err set, since only its bytes can say whose it is. A
// manifest labelled as another target's (app=<other target>: target <t>-b's
// manifest has the name of slot b of target <t>) is not this target's and is
// left out; CheckSlotFree says so before anything is published there.
func (l Layout) PublishedSlots(f FS) ([]PublishedSlot, error) {
	var out []PublishedSlot
	for _, s := range Slots {
		p := l.PublishedSlotManifest(s)
		data, err := f.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		ps := PublishedSlot{Slot: s, Path: p, Data: data}
		var m manifestMeta
		if err := yaml.Unmarshal(data, &m); err != nil {
			ps.Err = fmt.Errorf("parse %s: %w", p, err)
		} else {
			if app, ok := m.Metadata.Labels[AppLabel]; ok && app != l.Target {
				continue
			}
			ps.UID, ps.Annotations = m.Metadata.UID, m.Metadata.Annotations
			_, ps.Labeled = m.Metadata.Labels[SlotLabel]
			ps.Revision, ps.Err = RevisionLabelOf(data, p)
		}
		out = append(out, ps)
	}
	return out, nil
}

// ServingSlot picks among published slots the one that keeps serving while
// the other is rolled out: the one holding revision lkg (the last-known-good
// revision, 0 when none), else the one of the lowest revision; a manifest
// without a usable revision is picked only when it is alone. Nil when no
// slot is published.
func ServingSlot(slots []PublishedSlot, lkg int) *PublishedSlot {
	if len(slots) == 0 {
		return nil
	}
	if lkg > 0 {
		for i := range slots {
			if slots[i].Err == nil && slots[i].Revision == lkg {
				return &slots[i]
			}
		}
	}
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := slots[order[i]], slots[order[j]]
		if (a.Err == nil) != (b.Err == nil) {
			return a.Err == nil
		}
		return a.Revision < b.Revision
	})
	return &slots[order[0]]
}

// FreeSlot is the slot a new revision is published into: the one the
// serving slot (see ServingSlot) does not hold.
func FreeSlot(slots []PublishedSlot, lkg int) Slot {
	if s := ServingSlot(slots, lkg); s != nil {
		return s.Slot.Other()
	}
	return SlotA
}

// SlotManifest returns operand manifest data (a revision's <t>-pod.yaml) as
// published into slot s: metadata.name the slot's pod name, the slot label
// set, metadata.uid uid. Everything else is kept as it is.
func (l Layout) SlotManifest(data []byte, s Slot, uid string) ([]byte, error) {
	var pod map[string]any
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, fmt.Errorf("parse operand manifest: %w", err)
	}
	if pod == nil {
		return nil, errors.New("parse operand manifest: empty document")
	}
	meta, ok := pod["metadata"].(map[string]any)
	if !ok {
		if pod["metadata"] != nil {
			return nil, errors.New("operand manifest: metadata is not an object")
		}
		meta = map[string]any{}
		pod["metadata"] = meta
	}
	labels, ok := meta["labels"].(map[string]any)
	if !ok {
		if meta["labels"] != nil {
			return nil, errors.New("operand manifest: metadata.labels is not an object")
		}
		labels = map[string]any{}
		meta["labels"] = labels
	}
	meta["name"] = l.SlotPodName(s)
	meta["uid"] = uid
	labels[SlotLabel] = string(s)
	out, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode operand manifest: %w", err)
	}
	return out, nil
}

// NewUID returns a random RFC 4122 version 4 UUID, the form of
// metadata.uid. Every publish into a slot takes a new one: the kubelet
// treats a new uid as a new pod, and a changed manifest with the same uid
// as an update of the running pod.
func NewUID() string { return string(uuid.NewUUID()) }

// ServingRevision returns the revision of the serving operand manifest (see
// ServingSlot), in either publish mode: in replace mode that is the one
// manifest. It returns an error wrapping ErrNoManifest when none is
// published, and the manifest's error when it has no usable revision label.
func (l Layout) ServingRevision(f FS) (int, error) {
	slots, err := l.PublishedSlots(f)
	if err != nil {
		return 0, err
	}
	lkg, _ := l.LastKnownGood(f)
	s := ServingSlot(slots, lkg)
	if s == nil {
		return 0, fmt.Errorf("%s: %w", l.ManifestsDir, ErrNoManifest)
	}
	return s.Revision, s.Err
}

// NewestPublishedRevision returns the highest revision among the published
// operand manifests, in either publish mode: the revision being rolled out
// beside the serving one, or the serving one when no rollout is under way.
// It returns an error wrapping ErrNoManifest when none is published with a
// usable revision label.
func (l Layout) NewestPublishedRevision(f FS) (int, error) {
	slots, err := l.PublishedSlots(f)
	if err != nil {
		return 0, err
	}
	newest := 0
	for _, s := range slots {
		if s.Err == nil && s.Revision > newest {
			newest = s.Revision
		}
	}
	if newest == 0 {
		return 0, fmt.Errorf("%s: %w", l.ManifestsDir, ErrNoManifest)
	}
	return newest, nil
}

// CheckSlotFree returns an error wrapping ErrForeignManifest when slot s's
// file holds another target's manifest, which publishing into the slot
// would overwrite.
func (l Layout) CheckSlotFree(f FS, s Slot) error {
	p := l.PublishedSlotManifest(s)
	data, err := f.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	var m manifestMeta
	if yaml.Unmarshal(data, &m) != nil {
		return nil
	}
	if app, ok := m.Metadata.Labels[AppLabel]; ok && app != l.Target {
		return fmt.Errorf("%s is labelled %s=%s, not %s: in slots mode target %q's slot %s has the names of target %q's pod, so the two cannot share the manifests dir %s (use --publish=replace or another --target): %w",
			p, AppLabel, app, l.Target, l.Target, s, app, l.ManifestsDir, ErrForeignManifest)
	}
	return nil
}
