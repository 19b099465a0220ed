package config

import (
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/revgate/revgate/proxy/model"
)

// edge points from an object to one that depends on it.
type edge struct {
	to         model.ObjectRef
	delegation bool
}

// graph is the dependency graph of one configuration: IngressClass →
// Ingress; Service → Ingress, IngressRoute; EndpointSlice → Service; TLS
// Secret → Ingress, IngressRoute; IngressRoute → the IngressRoutes it
// delegates to.
type graph struct {
	deps       map[model.ObjectRef][]dep
	dependants map[model.ObjectRef][]edge
	// parents are the delegating IngressRoutes of an IngressRoute.
	parents map[model.ObjectRef][]model.ObjectRef
}

func newGraph(deps map[model.ObjectRef][]dep) *graph {
	g := &graph{deps: deps, dependants: map[model.ObjectRef][]edge{}, parents: map[model.ObjectRef][]model.ObjectRef{}}
	for from, ds := range deps {
		for _, d := range ds {
			g.dependants[d.ref] = append(g.dependants[d.ref], edge{to: from, delegation: d.delegation})
			if d.delegation {
				g.parents[from] = append(g.parents[from], d.ref)
			}
		}
	}
	for k := range g.dependants {
		es := g.dependants[k]
		sort.Slice(es, func(i, j int) bool { return refLess(es[i].to, es[j].to) })
	}
	return g
}

// cutOff returns the objects that cannot be served once the broken objects
// (and those already removed) are gone: every transitive dependant, except
// that an IngressRoute is cut off by delegation only when all its delegating
// parents are gone. For each, it lists the broken objects that cause it.
func (g *graph) cutOff(broken []model.ObjectRef, removed map[model.ObjectRef]bool) map[model.ObjectRef][]model.ObjectRef {
	gone := map[model.ObjectRef]bool{}
	for r := range removed {
		gone[r] = true
	}
	for _, b := range broken {
		gone[b] = true
	}
	out := map[model.ObjectRef][]model.ObjectRef{}
	queue := append([]model.ObjectRef(nil), broken...)
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, e := range g.dependants[x] {
			if gone[e.to] {
				continue
			}
			if e.delegation && !g.allParentsGone(e.to, gone) {
				continue
			}
			gone[e.to] = true
			out[e.to] = nil
			queue = append(queue, e.to)
		}
	}
	// Causes: which broken objects reach each cut-off object.
	for _, b := range broken {
		seen := map[model.ObjectRef]bool{b: true}
		q := []model.ObjectRef{b}
		for len(q) > 0 {
			x := q[0]
			q = q[1:]
			for _, e := range g.dependants[x] {
				if _, ok := out[e.to]; !ok || seen[e.to] {
					continue
				}
				seen[e.to] = true
				out[e.to] = append(out[e.to], b)
				q = append(q, e.to)
			}
		}
	}
	for k, v := range out {
		sort.Slice(v, func(i, j int) bool { return refLess(v[i], v[j]) })
		out[k] = v
	}
	return out
}

func (g *graph) allParentsGone(r model.ObjectRef, gone map[model.ObjectRef]bool) bool {
	for _, p := range g.parents[r] {
		if !gone[p] {
			return false
		}
	}
	return true
}

// onlyByDelegation reports whether r lost nothing but its delegating parents.
func (g *graph) onlyByDelegation(r model.ObjectRef, gone map[model.ObjectRef]bool) bool {
	for _, d := range g.deps[r] {
		if !d.delegation && gone[d.ref] {
			return false
		}
	}
	return true
}

// causeString renders a reference as Kong's fallback report does:
// "group/Kind:namespace/name" with the core group written "core", or
// "group/Kind:name" for cluster-scoped objects.
func causeString(r model.ObjectRef) string {
	group := r.Group
	if group == "" {
		group = "core"
	}
	if r.Namespace == "" {
		return group + "/" + r.Kind + ":" + r.Name
	}
	return group + "/" + r.Kind + ":" + r.Namespace + "/" + r.Name
}

// fallbackObject renders r for the report. o is the version of the object
// reported (the last-known-good one when backfilled), for its uid and API
// version; Kong gives the version of excluded and backfilled objects only.
func fallbackObject(r model.ObjectRef, o *object, withVersion bool, causes []model.ObjectRef) model.FallbackObject {
	fo := model.FallbackObject{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
	if o != nil && o.meta != nil {
		fo.ID = string(o.meta.UID)
	}
	if withVersion && o != nil {
		fo.Version = apiVersion(o)
	}
	for _, c := range causes {
		fo.CausingObjects = append(fo.CausingObjects, causeString(c))
	}
	return fo
}

// apiVersion is the version part of the object's apiVersion ("v1" of
// "networking.k8s.io/v1").
func apiVersion(o *object) string {
	k, ok := o.obj.(interface{ GetObjectKind() schema.ObjectKind })
	if !ok {
		return ""
	}
	return k.GetObjectKind().GroupVersionKind().Version
}
