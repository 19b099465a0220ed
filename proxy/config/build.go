package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// Build loads the configuration named by opts and translates it into a
// snapshot, applying object-level fallback:
//
//   - exclude (default): every broken object (one with a translation error) is
//     left out together with everything that transitively depends on it; the
//     rest is served. An IngressRoute is cut off through delegation only when
//     every IngressRoute delegating to it is gone (Contour reports it
//     orphaned).
//   - backfill: what exclude leaves out is replaced by its version from the
//     last-known-good revision where that version was itself served, together
//     with what it needs from there (a Service, EndpointSlices, a Secret, an
//     IngressClass or a delegated IngressRoute that the current revision no
//     longer has in a usable state). Objects absent there stay excluded. An
//     IngressRoute cut off only because its delegating parents went keeps its
//     current (valid, newer) version once a parent is served again.
//   - off: only the broken objects are left out; an object that cannot be
//     translated without one of them gets an error of its own. The data plane
//     fails readiness while Snapshot.Errors() is non-empty.
//
// Build fails only when nothing can be read at all (a folder that does not
// exist); every per-object problem is in Snapshot.Problems, Snapshot.Objects
// and Snapshot.Fallback.
func Build(opts Options) (*model.Snapshot, error) {
	clk := clock.RealClock{}
	start := clk.Now()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options: %w", err)
	}
	b := &builder{opts: opts, fs: osFS, clock: clk}
	if b.opts.ConfigTime.IsZero() {
		b.opts.ConfigTime = b.configTime()
	}
	cur, problems, err := b.fs.load(opts.Dirs, opts.Namespace)
	if err != nil {
		return nil, err
	}
	snap := b.build(cur, problems)
	snap.BuiltAt = start
	snap.TranslationDuration = b.clock.Since(start)
	return snap, nil
}

// Validate loads and translates the configuration like Build and returns every
// problem found, errors and warnings, in a stable order. It is the validator
// of `revgate validate` and of the installer.
func Validate(opts Options) ([]model.Problem, error) {
	snap, err := Build(opts)
	if err != nil {
		return nil, err
	}
	return snap.Problems, nil
}

type builder struct {
	opts Options
	fs   fileSystem
	// clock tells the time certificates are checked against and the
	// configuration time when none is given; clock.RealClock when nil.
	clock clock.PassiveClock
}

// configTime resolves Options.ConfigTime when not given: the install time
// of the revision folder Dirs[0], else now.
func (b *builder) configTime() time.Time {
	if l, n, ok := revisions.LayoutFromRevisionDir(b.opts.Dirs[0]); ok {
		path := l.RevisionPodManifest(n)
		if data, err := b.fs.readFile(path); err == nil {
			if at, err := revisions.InstalledAtOf(data, path); err == nil {
				return at
			}
		}
	}
	return b.now()
}

func (b *builder) now() time.Time {
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	return b.clock.Now()
}

// lastKnownGoodDir resolves the revision folder used for backfill.
func (b *builder) lastKnownGoodDir() (string, error) {
	if b.opts.LastKnownGoodDir != "" {
		return b.opts.LastKnownGoodDir, nil
	}
	if len(b.opts.Dirs) == 0 {
		return "", errors.New("no configuration folder")
	}
	l, _, ok := revisions.LayoutFromRevisionDir(b.opts.Dirs[0])
	if !ok {
		return "", fmt.Errorf("--last-known-good-dir not set and %s is not a revision folder", b.opts.Dirs[0])
	}
	dir, _, err := l.LastKnownGoodDir(revisions.OS())
	if err != nil {
		return "", fmt.Errorf("resolve last-known-good revision: %w", err)
	}
	return dir, nil
}

// fallbackState is what fallback decided, per object.
type fallbackState struct {
	// broken are current objects with an error, with the first message.
	broken map[model.ObjectRef]string
	// removed are objects left out of what is served (broken or cut off).
	removed map[model.ObjectRef]bool
	// causes are, for cut-off objects, the broken objects causing it.
	causes map[model.ObjectRef][]model.ObjectRef
	// backfilled are last-known-good versions served instead.
	backfilled map[model.ObjectRef]*object
	// lkgFailed are objects whose last-known-good version did not translate.
	lkgFailed map[model.ObjectRef]string
}

func (f *fallbackState) goneReason(r model.ObjectRef) string {
	if m, ok := f.broken[r]; ok {
		return m
	}
	var cs []string
	for _, c := range f.causes[r] {
		cs = append(cs, causeString(c))
	}
	return "depends on broken " + strings.Join(cs, ", ")
}

func (f *fallbackState) cut(co map[model.ObjectRef][]model.ObjectRef) {
	for k, v := range co {
		f.removed[k] = true
		f.causes[k] = mergeRefs(f.causes[k], v)
	}
}

func mergeRefs(a, b []model.ObjectRef) []model.ObjectRef {
	seen := map[model.ObjectRef]bool{}
	var out []model.ObjectRef
	for _, r := range append(append([]model.ObjectRef(nil), a...), b...) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return refLess(out[i], out[j]) })
	return out
}

func sortedRefs[V any](m map[model.ObjectRef]V) []model.ObjectRef {
	out := make([]model.ObjectRef, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return refLess(out[i], out[j]) })
	return out
}

// maxRounds bounds re-translation after fallback; each round only removes
// objects, so it converges long before.
const maxRounds = 16

func (b *builder) build(cur *store, loadProblems []model.Problem) *model.Snapshot {
	mode := b.opts.Fallback
	r1 := translate(b.opts, b.now(), cur, nil, false)
	g1 := newGraph(r1.deps)
	f := &fallbackState{
		broken:     map[model.ObjectRef]string{},
		removed:    map[model.ObjectRef]bool{},
		causes:     map[model.ObjectRef][]model.ObjectRef{},
		backfilled: map[model.ObjectRef]*object{},
		lkgFailed:  map[model.ObjectRef]string{},
	}
	for k, v := range r1.broken {
		f.broken[k] = v
		f.removed[k] = true
	}
	if mode != model.FallbackOff {
		f.cut(g1.cutOff(sortedRefs(r1.broken), nil))
	}
	problems := append([]model.Problem(nil), loadProblems...)
	problems = append(problems, r1.problems...)
	if mode == model.FallbackBackfill && len(f.removed) > 0 {
		if p := b.backfill(cur, g1, f); p != nil {
			problems = append(problems, *p)
		}
	}
	rf := r1
	// Nothing removed: the first translation is what is served.
	for round := 0; len(f.removed) > 0; round++ {
		gone := map[model.ObjectRef]string{}
		for r := range f.removed {
			if f.backfilled[r] == nil {
				gone[r] = f.goneReason(r)
			}
		}
		rf = translate(b.opts, b.now(), assemble(cur, f), gone, mode == model.FallbackOff)
		problems = appendNew(problems, rf.problems, f.backfilled)
		if len(rf.broken) == 0 || round == maxRounds {
			break
		}
		nb := sortedRefs(rf.broken)
		for _, r := range nb {
			if bo := f.backfilled[r]; bo != nil {
				f.lkgFailed[r] = rf.broken[r]
				delete(f.backfilled, r)
			} else {
				f.broken[r] = rf.broken[r]
			}
			f.removed[r] = true
		}
		if mode != model.FallbackOff {
			co := newGraph(rf.deps).cutOff(nb, f.removed)
			f.cut(co)
			for r := range co {
				delete(f.backfilled, r)
			}
		}
	}
	snap := &model.Snapshot{
		Revision:     b.opts.Revision,
		Routes:       rf.routes,
		Backends:     rf.backends,
		Certificates: rf.certs,
		Problems:     problems,
		Mode:         mode,
	}
	if snap.Certificates == nil {
		snap.Certificates = []model.Certificate{}
	}
	snap.Objects = b.statuses(cur, r1, rf, g1, f)
	snap.Fallback = fallbackReport(mode, f, cur)
	return snap
}

// appendNew adds the problems of a later round that were not reported yet;
// problems of last-known-good versions are warnings (they are not served).
func appendNew(ps, more []model.Problem, backfilled map[model.ObjectRef]*object) []model.Problem {
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		seen[string(p.Severity)+p.String()] = true
	}
	for _, p := range more {
		if seen[string(p.Severity)+p.String()] {
			continue
		}
		if bo := backfilled[p.Object]; bo != nil && bo.file == p.File && p.Severity == model.SeverityError {
			p.Severity = model.SeverityWarning
			p.Message = "last-known-good version not served: " + p.Message
		}
		seen[string(p.Severity)+p.String()] = true
		ps = append(ps, p)
	}
	return ps
}

// assemble builds the store that is served: the current objects that are not
// removed, plus the backfilled last-known-good versions.
func assemble(cur *store, f *fallbackState) *store {
	st := newStore()
	var discard []model.Problem
	for _, o := range cur.objects {
		if o.obj == nil || o.ignored != "" || f.removed[o.ref] {
			continue
		}
		st.add(o, &discard)
	}
	for _, r := range sortedRefs(f.backfilled) {
		st.add(f.backfilled[r], &discard)
	}
	return st
}

// backfill loads the last-known-good revision and picks the versions of
// removed objects that were served there, with what they need. It returns a
// warning when there is nothing to backfill from.
func (b *builder) backfill(cur *store, g1 *graph, f *fallbackState) *model.Problem {
	dir, err := b.lastKnownGoodDir()
	if err == nil {
		var lkg *store
		lkg, _, err = b.fs.load([]string{dir}, b.opts.Namespace)
		if err == nil {
			b.backfillFrom(cur, lkg, g1, f)
			return nil
		}
	}
	return &model.Problem{Message: fmt.Sprintf("nothing backfilled: %v", err), Severity: model.SeverityWarning}
}

func (b *builder) backfillFrom(cur, lkg *store, g1 *graph, f *fallbackState) {
	rl := translate(b.opts, b.now(), lkg, nil, false)
	gl := newGraph(rl.deps)
	bad := map[model.ObjectRef]bool{}
	for r := range rl.broken {
		bad[r] = true
	}
	for r := range gl.cutOff(sortedRefs(rl.broken), nil) {
		bad[r] = true
	}
	usable := func(r model.ObjectRef) *object {
		lo := lkg.byRef[r]
		if lo == nil || lo.ignored != "" || bad[r] || rl.ignored[r] != "" {
			return nil
		}
		lo.lkg = true
		return lo
	}
	for _, r := range sortedRefs(f.removed) {
		if lo := usable(r); lo != nil {
			f.backfilled[r] = lo
		}
	}
	b.restoreDelegated(g1, f)
	queue := sortedRefs(f.backfilled)
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		var needs []model.ObjectRef
		for _, d := range rl.deps[x] {
			if !d.delegation {
				needs = append(needs, d.ref)
			}
		}
		for _, e := range gl.dependants[x] {
			if e.delegation {
				needs = append(needs, e.to)
			}
		}
		for _, n := range needs {
			if f.backfilled[n] != nil {
				continue
			}
			if co := cur.byRef[n]; co != nil && co.ignored == "" && !f.removed[n] {
				continue
			}
			if lo := usable(n); lo != nil {
				f.backfilled[n] = lo
				if !f.removed[n] {
					// Absent from the current revision: needed by x.
					f.causes[n] = mergeRefs(f.causes[n], f.causesOf(x))
				}
				queue = append(queue, n)
			}
		}
	}
}

// restoreDelegated keeps the current version of an IngressRoute that was cut
// off only because its delegating parents went, once one of those parents is
// served again (backfilled, or itself restored): the current version is valid
// and newer than the last-known-good one.
func (b *builder) restoreDelegated(g1 *graph, f *fallbackState) {
	for changed := true; changed; {
		changed = false
		for _, r := range sortedRefs(f.removed) {
			if r.Kind != kindIngressRoute || f.broken[r] != "" || !g1.onlyByDelegation(r, f.removed) {
				continue
			}
			for _, p := range g1.parents[r] {
				if f.backfilled[p] != nil || !f.removed[p] {
					delete(f.removed, r)
					delete(f.causes, r)
					delete(f.backfilled, r)
					changed = true
					break
				}
			}
		}
	}
}

// causesOf is the broken objects behind a removed object (itself if broken).
func (f *fallbackState) causesOf(r model.ObjectRef) []model.ObjectRef {
	if _, ok := f.broken[r]; ok {
		return []model.ObjectRef{r}
	}
	return f.causes[r]
}

// statuses reports every loaded object (and every object pulled in from the
// last-known-good revision).
func (b *builder) statuses(cur *store, r1, rf *translation, g1 *graph, f *fallbackState) []model.ObjectStatus {
	used := rf.used
	// An IngressClass is in use when an Ingress in use depends on it.
	for r, ds := range rf.deps {
		if r.Kind != kindIngress || !used[r] {
			continue
		}
		for _, d := range ds {
			if d.ref.Kind == kindIngressClass {
				used[d.ref] = true
			}
		}
	}
	var out []model.ObjectStatus
	for _, o := range cur.objects {
		s := model.ObjectStatus{Object: o.ref, File: o.file}
		r := o.ref
		if o.ignored != "" {
			s.Status, s.Description = model.StatusIgnored, o.ignored
			out = append(out, s)
			continue
		}
		if why, ok := r1.ignored[r]; ok {
			s.Status, s.Description = model.StatusIgnored, why
			out = append(out, s)
			continue
		}
		switch {
		case f.backfilled[r] != nil:
			s.Status, s.InUse = model.StatusBackfilled, used[r]
			s.Description = f.goneReason(r) + "; serving its last-known-good version from " + f.backfilled[r].file
		case f.broken[r] != "":
			s.Status, s.Description = model.StatusInvalid, f.broken[r]
		case f.removed[r]:
			s.Status, s.Description = model.StatusExcluded, f.goneReason(r)
			if r.Kind == kindIngressRoute && g1.onlyByDelegation(r, f.removed) {
				s.Status = model.StatusOrphaned
				s.Description = "not part of a delegation chain from a root: " + f.goneReason(r)
			}
		case r.Kind == kindIngressRoute:
			ir := rf.ir[r]
			s.Status, s.Description, s.Root, s.InUse = ir.status, ir.description, ir.root, used[r]
		default:
			s.Status, s.InUse = model.StatusValid, used[r]
		}
		if why, ok := f.lkgFailed[r]; ok {
			s.Description += "; last-known-good version not served: " + why
		}
		if r.Kind == kindIngressRoute {
			s.VirtualHost, s.IsRoot = irVirtualHost(o, rf, g1, servedObject(cur, f))
		}
		out = append(out, s)
	}
	for _, r := range sortedRefs(f.backfilled) {
		if co := cur.byRef[r]; co != nil {
			continue
		}
		bo := f.backfilled[r]
		s := model.ObjectStatus{Object: r, File: bo.file, Status: model.StatusBackfilled, InUse: used[r]}
		s.Description = "absent from this revision; needed by backfilled objects"
		if r.Kind == kindIngressRoute {
			s.Root = rf.ir[r].root
			s.VirtualHost, s.IsRoot = irVirtualHost(bo, rf, g1, servedObject(cur, f))
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return refLess(out[i].Object, out[j].Object) })
	return out
}

// fallbackReport renders the decisions in the shape of Kong's
// /debug/config/fallback: broken objects, excluded objects (the broken ones
// and everything cut off with them) and backfilled objects, each with the
// broken objects causing it. cur is the configuration's store, for the
// objects' uids and versions.
func fallbackReport(mode model.FallbackMode, f *fallbackState, cur *store) model.FallbackReport {
	rep := model.FallbackReport{
		Status:            model.FallbackNotTriggered,
		BrokenObjects:     []model.FallbackObject{},
		ExcludedObjects:   []model.FallbackObject{},
		BackfilledObjects: []model.FallbackObject{},
	}
	if len(f.broken) > 0 && mode != model.FallbackOff {
		rep.Status = model.FallbackTriggered
	}
	for _, r := range sortedRefs(f.broken) {
		rep.BrokenObjects = append(rep.BrokenObjects, fallbackObject(r, cur.byRef[r], false, nil))
	}
	if mode == model.FallbackOff {
		return rep
	}
	for _, r := range sortedRefs(f.removed) {
		rep.ExcludedObjects = append(rep.ExcludedObjects, fallbackObject(r, cur.byRef[r], true, f.causesOf(r)))
	}
	for _, r := range sortedRefs(f.backfilled) {
		rep.BackfilledObjects = append(rep.BackfilledObjects, fallbackObject(r, f.backfilled[r], true, f.causesOf(r)))
	}
	return rep
}
