package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/revgate/revgate/proxy/admin"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// The admin listener's handler: health, liveness and readiness checks and
// the debug documents.

// AdminHandler returns the admin endpoints' handler. Checks: healthz has
// ping, config, listeners, certificates and fallback; livez ping and
// listeners; readyz the healthz checks (config failing in --fallback=off
// while objects are broken) plus shutdown and dependency/upstreams.
func (g *Gateway) AdminHandler() http.Handler {
	common := []admin.Check{
		{Name: "ping", Run: func() (string, error) { return "", nil }},
		{Name: "config", Run: g.checkConfigLoaded},
		{Name: "listeners", Run: g.checkListeners},
		{Name: "certificates", Run: g.checkCertificates},
		{Name: "fallback", Run: g.checkFallback},
	}
	// livez restarts the process when red (kubelet liveness): only what a
	// restart can mend belongs there.
	live := []admin.Check{common[0], common[2]}
	ready := slices.Clone(common)
	ready[1] = admin.Check{Name: "config", Run: g.checkConfigReady}
	ready[2] = admin.Check{Name: "listeners", Run: g.checkListenersReady}
	ready = append(ready,
		admin.Check{Name: "shutdown", Run: g.checkShutdown},
		// The prefix tells a startup monitor that this is a dependency
		// (DependencyUnhealthy) rather than the gateway not being ready.
		admin.Check{Name: revisions.DependencyCheckPrefix + "upstreams", Run: g.checkUpstreams},
	)
	return admin.NewHandler(admin.Options{
		Revision: g.Snapshot().Revision,
		PID:      g.opts.PID,
		Healthz:  common,
		Livez:    live,
		Readyz:   ready,
		Metrics:  g.metrics.Handler(),
		Pprof:    g.opts.Pprof,
		Debug: map[string]func() any{
			"/debug/config/status":   g.debugStatus,
			"/debug/config/routes":   g.debugRoutes,
			"/debug/config/fallback": func() any { return g.Snapshot().Fallback },

			// The live endpoints source (endpoints.go).
			"/debug/config/endpoints": g.debugEndpoints,
		},
	})
}

func (g *Gateway) checkConfigLoaded() (string, error) {
	s := g.Snapshot()
	return fmt.Sprintf("revision %d, %d routes", s.Revision, len(s.Routes)), nil
}

// checkConfigReady fails in --fallback=off while any object is broken.
func (g *Gateway) checkConfigReady() (string, error) {
	s := g.Snapshot()
	if s.Mode == model.FallbackOff {
		if errs := s.Errors(); len(errs) > 0 {
			names := make([]string, 0, len(errs))
			for _, p := range errs {
				names = append(names, p.String())
			}
			return "", fmt.Errorf("fallback is off and %d configuration errors: %s", len(errs), strings.Join(names, "; "))
		}
	}
	return g.checkConfigLoaded()
}

func (g *Gateway) checkListeners() (string, error) {
	if p := g.listenErr.Load(); p != nil {
		return "", *p
	}
	if !g.bound.Load() {
		return "", errors.New("listeners not bound yet")
	}
	return "", nil
}

// checkListenersReady also reports listeners waiting to join a port held by
// another process: green while the other checks keep the gateway out (so a
// monitor sees only those), red in the moment between passing them and
// taking traffic.
func (g *Gateway) checkListenersReady() (string, error) {
	if _, err := g.checkListeners(); err != nil {
		return "", err
	}
	waiting := g.waiting()
	if len(waiting) == 0 {
		return "", nil
	}
	addrs := make([]string, 0, len(waiting))
	for _, ls := range waiting {
		addrs = append(addrs, ls.addr)
	}
	if g.gateReady() == nil && !g.draining.Load() {
		return "", fmt.Errorf("joining %s", strings.Join(addrs, ", "))
	}
	return "waiting until ready to join " + strings.Join(addrs, ", ") + " (held by another process)", nil
}

func (g *Gateway) checkCertificates() (string, error) {
	rt := g.runtime.Load()
	if rt.certErr != nil {
		return "", rt.certErr
	}
	return fmt.Sprintf("%d certificates", rt.certs.count), nil
}

func (g *Gateway) checkFallback() (string, error) {
	f := g.Snapshot().Fallback
	status := f.Status
	if status == "" {
		status = model.FallbackNotTriggered
	}
	return fmt.Sprintf("%s: %d broken, %d excluded, %d backfilled objects", status,
		len(f.BrokenObjects), len(f.ExcludedObjects), len(f.BackfilledObjects)), nil
}

func (g *Gateway) checkShutdown() (string, error) {
	if g.draining.Load() {
		return "", errors.New("shutting down")
	}
	return "", nil
}

// checkUpstreams fails when a backend that has endpoints has none healthy.
func (g *Gateway) checkUpstreams() (string, error) {
	rt := g.runtime.Load()
	var bad []string
	for key, p := range rt.pools {
		if len(p.Endpoints()) > 0 && !p.HasHealthy() {
			bad = append(bad, key)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return "", fmt.Errorf("no healthy endpoint in backends %s", strings.Join(bad, ", "))
	}
	return fmt.Sprintf("%d backends", len(rt.pools)), nil
}

type statusDoc struct {
	Revision int                  `json:"revision"`
	Mode     model.FallbackMode   `json:"mode"`
	Objects  []model.ObjectStatus `json:"objects"`
	Problems []model.Problem      `json:"problems"`
}

func (g *Gateway) debugStatus() any {
	s := g.Snapshot()
	return statusDoc{Revision: s.Revision, Mode: s.Mode, Objects: nonNil(s.Objects), Problems: nonNil(s.Problems)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

type routeDoc struct {
	Host          string          `json:"host"`
	Path          string          `json:"path"`
	PathType      model.PathType  `json:"pathType"`
	Default       bool            `json:"default,omitempty"`
	RedirectHTTPS bool            `json:"redirectHTTPS,omitempty"`
	Backfilled    bool            `json:"backfilled,omitempty"`
	Source        model.ObjectRef `json:"source"`
	Cluster       string          `json:"cluster"`
	Backends      []backendDoc    `json:"backends"`
	Canary        *canaryDoc      `json:"canary,omitempty"`
}

type backendDoc struct {
	Key       string        `json:"key"`
	Weight    uint32        `json:"weight"`
	Strategy  string        `json:"strategy"`
	Endpoints []endpointDoc `json:"endpoints"`
}

type endpointDoc struct {
	Address string `json:"address"`
	Healthy bool   `json:"healthy"`
	Active  int64  `json:"active"`
}

type canaryDoc struct {
	Backend       backendDoc `json:"backend"`
	ActiveBuckets uint64     `json:"activeBuckets"`
	Steps         int        `json:"steps"`
}

func (g *Gateway) debugRoutes() any {
	rt := g.runtime.Load()
	backend := func(b *model.Backend, w uint32) backendDoc {
		d := backendDoc{Key: b.Key, Weight: w, Strategy: string(b.Strategy), Endpoints: []endpointDoc{}}
		if d.Strategy == "" {
			d.Strategy = string(model.RoundRobin)
		}
		if p := rt.pools[b.Key]; p != nil {
			for _, e := range p.Endpoints() {
				d.Endpoints = append(d.Endpoints, endpointDoc{Address: e.Addr, Healthy: e.Healthy(), Active: e.Active()})
			}
		}
		return d
	}
	out := []routeDoc{}
	for _, e := range rt.table.Entries() {
		r := e.Route
		d := routeDoc{Host: r.Host, Path: r.Path, PathType: r.PathType, Default: r.Default, RedirectHTTPS: r.RedirectHTTPS,
			Backfilled: r.Backfilled, Source: r.Source, Backends: []backendDoc{}}
		if r.Cluster != nil {
			d.Cluster = r.Cluster.Name
			for _, wb := range r.Cluster.Backends {
				if wb.Backend != nil {
					d.Backends = append(d.Backends, backend(wb.Backend, wb.Weight))
				}
			}
			if c := r.Cluster.Canary; c != nil && c.Backend != nil {
				cd := &canaryDoc{Backend: backend(c.Backend, 0), Steps: c.Steps}
				if cc := e.Value.(*routeInfo).cluster.Canary(); cc != nil {
					cd.ActiveBuckets = cc.ActiveBuckets()
				}
				d.Canary = cd
			}
		}
		out = append(out, d)
	}
	return out
}
