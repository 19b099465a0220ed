// Package route is the gateway's routing table: it finds the route for a
// request's host and path with the Ingress v1 semantics (exact host, then a
// one-label wildcard host, then any host; Exact beats Prefix, the longest
// element-wise prefix wins, an Ingress defaultBackend catches the rest).
//
// Lookup never scans the routes: a host is found with at most two map
// lookups and a path with one map lookup per '/' of the request path, so its
// cost does not grow with the number of routes.
package route

import (
	"strings"

	"github.com/revgate/revgate/proxy/model"
)

// Table is an immutable routing table built from a Snapshot's routes. It is
// safe for concurrent use.
type Table struct {
	exact    map[string]*hostRoutes // "foo.com"
	wildcard map[string]*hostRoutes // "*.foo.com" stored under "foo.com"
	any      *hostRoutes            // Host ""
	// defaults are the Default routes by host ("" for any host).
	defaults map[string]*Entry
	entries  []*Entry
}

// Entry is one route of the table together with data the data plane attaches
// to it (Value, set by the caller of New through the attach function).
type Entry struct {
	// Route is the route from the Snapshot.
	Route *model.Route
	// Value is data attached by the data plane (its compiled cluster).
	Value any
}

type hostRoutes struct {
	// key is the table key ("foo.com", "*.foo.com" or "").
	key    string
	exact  map[string]*Entry
	prefix map[string]*Entry
}

// New builds a table. attach, when non-nil, computes the Value of each entry.
// Routes are expected unique by (Host, Path, PathType); on a duplicate the
// first one wins.
func New(routes []model.Route, attach func(*model.Route) any) *Table {
	t := &Table{
		exact:    map[string]*hostRoutes{},
		wildcard: map[string]*hostRoutes{},
		defaults: map[string]*Entry{},
	}
	for i := range routes {
		r := &routes[i]
		e := &Entry{Route: r}
		if attach != nil {
			e.Value = attach(r)
		}
		t.entries = append(t.entries, e)
		host := strings.ToLower(r.Host)
		if r.Default {
			if _, dup := t.defaults[host]; !dup {
				t.defaults[host] = e
			}
			continue
		}
		h := t.hostFor(host)
		path := r.Path
		if path == "" {
			path = "/"
		}
		if r.PathType == model.PathExact {
			if _, dup := h.exact[path]; !dup {
				h.exact[path] = e
			}
			continue
		}
		path = trimSlash(path)
		if _, dup := h.prefix[path]; !dup {
			h.prefix[path] = e
		}
	}
	return t
}

func (t *Table) hostFor(host string) *hostRoutes {
	var m map[string]*hostRoutes
	key := host
	switch {
	case host == "":
		if t.any == nil {
			t.any = newHostRoutes("")
		}
		return t.any
	case strings.HasPrefix(host, "*."):
		m, key = t.wildcard, host[2:]
	default:
		m = t.exact
	}
	h := m[key]
	if h == nil {
		h = newHostRoutes(host)
		m[key] = h
	}
	return h
}

func newHostRoutes(key string) *hostRoutes {
	return &hostRoutes{key: key, exact: map[string]*Entry{}, prefix: map[string]*Entry{}}
}

// trimSlash removes trailing slashes of a prefix path, keeping "/".
func trimSlash(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// Entries returns every entry in Snapshot order (for /debug/config/routes).
func (t *Table) Entries() []*Entry { return t.entries }

// Lookup returns the entry for a request's Host header (any case, with or
// without a port) and URL path, or nil when nothing matches (a 404).
func (t *Table) Lookup(hostHeader, path string) *Entry {
	host := NormalizeHost(hostHeader)
	h := t.hostTier(host)
	if h != nil {
		if e := h.match(path); e != nil {
			return e
		}
		if e := t.defaults[h.key]; e != nil {
			return e
		}
	}
	return t.defaults[""]
}

// hostTier picks the routes of the most specific host tier that has any:
// exact host, then wildcard, then any host. There is no fall-through to a
// less specific tier once a tier is chosen.
func (t *Table) hostTier(host string) *hostRoutes {
	if host != "" {
		if h := t.exact[host]; h != nil {
			return h
		}
		if i := strings.IndexByte(host, '.'); i > 0 {
			if h := t.wildcard[host[i+1:]]; h != nil {
				return h
			}
		}
	}
	return t.any
}

// match finds the path route: Exact first, then the longest element-wise
// prefix, walking the request path down by '/' boundaries.
func (h *hostRoutes) match(path string) *Entry {
	if path == "" {
		path = "/"
	}
	if e := h.exact[path]; e != nil {
		return e
	}
	if len(h.prefix) == 0 {
		return nil
	}
	s := path
	for {
		if e := h.prefix[s]; e != nil {
			return e
		}
		i := strings.LastIndexByte(s, '/')
		if i <= 0 {
			break
		}
		s = s[:i]
	}
	return h.prefix["/"]
}

// NormalizeHost lower-cases a Host header and strips its port and a trailing
// dot. It does not allocate when the host is already lower-case.
func NormalizeHost(h string) string {
	if strings.HasPrefix(h, "[") {
		// IPv6 literal: keep the address inside the brackets.
		if i := strings.IndexByte(h, ']'); i > 0 {
			return strings.ToLower(h[1:i])
		}
		return strings.ToLower(h)
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}
