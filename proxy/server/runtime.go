package server

import (
	"sort"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
	"github.com/revgate/revgate/proxy/upstream"
)

// The runtime: a snapshot compiled into a routing table, upstream pools and
// certificates, swapped whole.

// runtime is a compiled snapshot.
type runtime struct {
	snap  *model.Snapshot
	table *route.Table
	// pools by backend key.
	pools map[string]*upstream.Pool
	certs *certStore
	// certErr is why some certificates could not be used.
	certErr error
}

// compile builds the routing table, one pool per backend and the
// certificate store.
func (g *Gateway) compile(snap *model.Snapshot) *runtime {
	rt := &runtime{snap: snap, pools: map[string]*upstream.Pool{}}
	pool := func(b *model.Backend) *upstream.Pool {
		if p := rt.pools[b.Key]; p != nil {
			return p
		}
		p := upstream.NewPool(b, g.opts.Transport)
		p.OnHealthChange(func(p *upstream.Pool, e *upstream.Endpoint, _ bool) {
			g.endpointHealthChanged(p, e)
		})
		for _, e := range p.Endpoints() {
			g.metrics.setEndpointHealth(b.Key, e.Addr, e.Healthy())
		}
		rt.pools[b.Key] = p
		return p
	}
	keys := make([]string, 0, len(snap.Backends))
	for k := range snap.Backends {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pool(snap.Backends[k])
	}
	clusters := map[*model.Cluster]*upstream.Cluster{}
	rt.table = route.New(snap.Routes, func(r *model.Route) any {
		c := clusters[r.Cluster]
		if c == nil {
			if r.Cluster == nil {
				c = upstream.NewCluster(&model.Cluster{}, pool, g.opts.Clock)
			} else {
				c = upstream.NewCluster(r.Cluster, pool, g.opts.Clock)
				clusters[r.Cluster] = c
			}
		}
		return &routeInfo{cluster: c, label: routeLabel(r)}
	})
	rt.certs, rt.certErr = newCertStore(snap.Certificates)
	return rt
}

// routeLabel names a route in metrics: "host/path (Type)", "*" for any host.
func routeLabel(r *model.Route) string {
	host := r.Host
	if host == "" {
		host = "*"
	}
	if r.Default {
		return host + " (default)"
	}
	return host + r.Path + " (" + string(r.PathType) + ")"
}
