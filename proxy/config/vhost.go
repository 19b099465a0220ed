package config

import (
	"sort"
	"strings"

	"github.com/revgate/revgate/proxy/model"
)

// servedObject looks an object up: its last-known-good version when
// backfilled, else the current one, served or not (nil when neither).
func servedObject(cur *store, f *fallbackState) func(model.ObjectRef) *object {
	return func(r model.ObjectRef) *object {
		if bo := f.backfilled[r]; bo != nil {
			return bo
		}
		if o := cur.byRef[r]; o != nil && o.ignored == "" {
			return o
		}
		return nil
	}
}

// irVirtualHost says whether the IngressRoute o is a root, and the fqdn it
// serves under: a root's own; a delegated object's that of the root reaching
// it in the served configuration, or when none does (it is invalid or cut
// off) of the first root, in namespace/name order, above it in the
// delegations, as Contour labels its invalid objects.
func irVirtualHost(o *object, rf *translation, g1 *graph, lookup func(model.ObjectRef) *object) (string, bool) {
	if vh := irOf(o).Spec.VirtualHost; vh != nil {
		return strings.ToLower(vh.Fqdn), true
	}
	root := rf.ir[o.ref].root
	if root == nil {
		root = firstRootAbove(o.ref, g1, lookup)
	}
	if root != nil {
		if ro := lookup(*root); ro != nil {
			if vh := irOf(ro).Spec.VirtualHost; vh != nil {
				return strings.ToLower(vh.Fqdn), false
			}
		}
	}
	return "", false
}

// firstRootAbove walks the delegating parents of r breadth first, each level
// in namespace/name order, and returns the first root found.
func firstRootAbove(r model.ObjectRef, g1 *graph, lookup func(model.ObjectRef) *object) *model.ObjectRef {
	seen := map[model.ObjectRef]bool{r: true}
	level := []model.ObjectRef{r}
	for len(level) > 0 {
		var next []model.ObjectRef
		for _, x := range level {
			for _, p := range g1.parents[x] {
				if !seen[p] {
					seen[p] = true
					next = append(next, p)
				}
			}
		}
		sort.Slice(next, func(i, j int) bool { return refLess(next[i], next[j]) })
		for _, p := range next {
			if po := lookup(p); po != nil && irOf(po).Spec.VirtualHost != nil {
				return &p
			}
		}
		level = next
	}
	return nil
}
