package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// Defaults of IngressRoute canaries (health-check defaults are in model).
const (
	DefaultCanarySteps          = 1000
	DefaultCanaryDuration       = time.Hour
	DefaultCanaryConsumerHeader = "X-Consumer-ID"
)

// irWalk is the state of the delegation walk over IngressRoutes.
type irWalk struct {
	objs    map[model.ObjectRef]*object
	blocked map[model.ObjectRef]bool
	// reached maps every object reached from a valid root to the first root
	// (in namespace/name order) that reaches it.
	reached map[model.ObjectRef]model.ObjectRef
	// checked are the (object, delegated prefix) pairs already checked and
	// emitted the (root, object) pairs already emitted, so that a diamond of
	// delegations is walked once, not once per path.
	checked map[[2]string]bool
	emitted map[[2]model.ObjectRef]bool
}

func irOf(o *object) *IngressRoute { return o.obj.(*IngressRoute) }

// ingressRoutes validates every IngressRoute, walks the delegation graph from
// the valid roots, and emits the routes of the valid objects.
func (t *translator) ingressRoutes(irs []*object) {
	w := &irWalk{
		objs:    map[model.ObjectRef]*object{},
		blocked: map[model.ObjectRef]bool{},
		reached: map[model.ObjectRef]model.ObjectRef{},
		checked: map[[2]string]bool{},
		emitted: map[[2]model.ObjectRef]bool{},
	}
	for _, o := range irs {
		w.objs[o.ref] = o
	}
	for _, o := range irs {
		if !t.irIntrinsic(o) {
			w.blocked[o.ref] = true
		}
	}
	var roots []*object
	fqdns := map[string][]*object{}
	for _, o := range irs {
		if vh := irOf(o).Spec.VirtualHost; vh != nil {
			roots = append(roots, o)
			fqdns[strings.ToLower(vh.Fqdn)] = append(fqdns[strings.ToLower(vh.Fqdn)], o)
		}
	}
	for _, o := range roots {
		fq := strings.ToLower(irOf(o).Spec.VirtualHost.Fqdn)
		if same := fqdns[fq]; len(same) > 1 {
			var others []string
			for _, s := range same {
				if s != o {
					others = append(others, s.ref.Namespace+"/"+s.ref.Name)
				}
			}
			t.errorf(o, "spec.virtualhost.fqdn", "fqdn %q is also used by %s", fq, strings.Join(others, ", "))
		}
	}
	// First walk: find delegation cycles and routes outside their delegated
	// prefix; these make objects invalid.
	for _, r := range roots {
		if t.irUsable(w, r) {
			t.irCheck(w, r, "/", []*object{r})
		}
	}
	// Second walk: emit the routes of what is valid and reachable.
	for _, r := range roots {
		if t.irUsable(w, r) {
			t.irEmit(w, r, r, nil)
		}
	}
	for _, o := range irs {
		switch {
		case t.out.broken[o.ref] != "":
			t.out.ir[o.ref] = irOutcome{status: model.StatusInvalid, description: t.out.broken[o.ref]}
		case w.blocked[o.ref]:
			t.out.ir[o.ref] = irOutcome{status: model.StatusExcluded, description: "depends on an invalid object"}
		default:
			root, ok := w.reached[o.ref]
			switch {
			case !ok:
				t.out.ir[o.ref] = irOutcome{status: model.StatusOrphaned, description: "not part of a delegation chain from a root"}
			case root == o.ref:
				t.out.ir[o.ref] = irOutcome{status: model.StatusValid, description: "valid IngressRoute", root: &root}
			default:
				t.out.ir[o.ref] = irOutcome{status: model.StatusValid, description: "delegated ingress route", root: &root}
			}
		}
	}
}

// irUsable reports whether an IngressRoute can take part in the walk.
func (t *translator) irUsable(w *irWalk, o *object) bool {
	return t.out.broken[o.ref] == "" && !w.blocked[o.ref]
}

// irIntrinsic validates what an IngressRoute says on its own and records its
// dependencies. It returns false when the object cannot be served because a
// dependency is unusable (or it has an error).
func (t *translator) irIntrinsic(o *object) bool {
	ir := irOf(o)
	ns := o.ref.Namespace
	usable := true
	if vh := ir.Spec.VirtualHost; vh != nil {
		fq := strings.ToLower(vh.Fqdn)
		if fq == "" {
			t.errorf(o, "spec.virtualhost.fqdn", "required")
		} else if strings.Contains(fq, "*") {
			t.errorf(o, "spec.virtualhost.fqdn", "invalid fqdn %q: wildcards are not allowed", vh.Fqdn)
		} else if err := validateHost(fq); err != "" {
			t.errorf(o, "spec.virtualhost.fqdn", "invalid fqdn %q: %s", vh.Fqdn, err)
		}
		if len(t.opts.RootNamespaces) > 0 && !slices.Contains(t.opts.RootNamespaces, ns) {
			t.errorf(o, "spec.virtualhost", "root IngressRoutes are not allowed in namespace %q (allowed: %s)", ns, strings.Join(t.opts.RootNamespaces, ", "))
		}
		if vh.TLS != nil {
			if _, ok := tlsVersion(vh.TLS.MinimumProtocolVersion); !ok {
				t.errorf(o, "spec.virtualhost.tls.minimumProtocolVersion", "unsupported version %q: want 1.1, 1.2 or 1.3", vh.TLS.MinimumProtocolVersion)
			}
			if _, _, ok := t.tlsSecret(o, "spec.virtualhost.tls.secretName", ns, vh.TLS.SecretName, []string{fq}); !ok {
				usable = false
			}
		}
		t.irStrategy(o, "spec.virtualhost.strategy", vh.Strategy)
		t.irHealthCheck(o, "spec.virtualhost.healthCheck", vh.HealthCheck)
	}
	if len(ir.Spec.Routes) == 0 {
		t.errorf(o, "spec.routes", "at least one route is required")
	}
	for i := range ir.Spec.Routes {
		r := &ir.Spec.Routes[i]
		field := fmt.Sprintf("spec.routes[%d]", i)
		if len(r.Service) > 0 {
			if len(r.Services) > 0 {
				t.errorf(o, field+".service", "both service and services set; use services")
				continue
			}
			r.Services, r.Service = r.Service, nil
		}
		if clean, err := validatePath(r.Match); err != "" {
			t.errorf(o, field+".match", "invalid match %q: %s", r.Match, err)
		} else {
			r.Match = clean
		}
		switch {
		case r.Delegate != nil && len(r.Services) > 0:
			t.errorf(o, field, "both services and delegate set")
			continue
		case r.Delegate == nil && len(r.Services) == 0:
			t.errorf(o, field, "one of services or delegate is required")
			continue
		}
		t.irStrategy(o, field+".strategy", r.Strategy)
		t.irHealthCheck(o, field+".healthCheck", r.HealthCheck)
		if d := r.Delegate; d != nil {
			if r.Canary != nil {
				t.errorf(o, field+".canary", "not allowed on a delegating route")
			}
			if d.Name == "" {
				t.errorf(o, field+".delegate.name", "required")
				continue
			}
			cref := model.ObjectRef{Group: IngressRouteGroup, Kind: kindIngressRoute, Namespace: delegateNS(d, ns), Name: d.Name}
			if c, missing := t.lookup(cref); missing {
				t.errorf(o, field+".delegate", "delegate %s/%s not found", cref.Namespace, cref.Name)
			} else if c != nil {
				t.addDep(c, o.ref, true)
			}
			continue
		}
		for j, s := range r.Services {
			sf := fmt.Sprintf("%s.services[%d]", field, j)
			t.irStrategy(o, sf+".strategy", s.Strategy)
			t.irHealthCheck(o, sf+".healthCheck", s.HealthCheck)
			if s.Port < 1 || s.Port > 65535 {
				t.errorf(o, sf+".port", "port %d out of range 1-65535", s.Port)
				continue
			}
			if _, _, ok := t.servicePort(o, sf, ns, s.Name, s.Port, ""); !ok && !t.hasErrorOn(o) {
				usable = false
			}
		}
		if c := r.Canary; c != nil {
			if !t.irCanaryCheck(o, field+".canary", c) {
				usable = false
			}
		}
	}
	return usable && !t.hasErrorOn(o)
}

func (t *translator) hasErrorOn(o *object) bool {
	_, ok := t.out.broken[o.ref]
	return ok
}

func delegateNS(d *IngressRouteDelegate, parent string) string {
	if d.Namespace != "" {
		return d.Namespace
	}
	return parent
}

func (t *translator) irStrategy(o *object, field, s string) model.Strategy {
	switch model.Strategy(s) {
	case "", model.RoundRobin, model.WeightedLeastRequest, model.Random:
		return model.Strategy(s)
	}
	t.errorf(o, field, "unsupported strategy %q: want RoundRobin, WeightedLeastRequest or Random", s)
	return ""
}

// irHealthCheck validates and translates a health check, applying defaults.
func (t *translator) irHealthCheck(o *object, field string, h *IngressRouteHealthCheck) *model.HealthCheck {
	if h == nil {
		return nil
	}
	if !strings.HasPrefix(h.Path, "/") {
		t.errorf(o, field+".path", "must start with '/'")
	}
	for _, c := range []struct {
		name string
		v    int64
	}{{"intervalSeconds", h.IntervalSeconds}, {"timeoutSeconds", h.TimeoutSeconds}, {"unhealthyThresholdCount", int64(h.UnhealthyThresholdCount)}, {"healthyThresholdCount", int64(h.HealthyThresholdCount)}} {
		if c.v < 0 {
			t.errorf(o, field+"."+c.name, "must not be negative")
		}
	}
	hc := &model.HealthCheck{
		Path: h.Path, Host: h.Host,
		Interval: time.Duration(h.IntervalSeconds) * time.Second, Timeout: time.Duration(h.TimeoutSeconds) * time.Second,
		UnhealthyThreshold: h.UnhealthyThresholdCount, HealthyThreshold: h.HealthyThresholdCount,
	}
	d := hc.WithDefaults()
	d.Path = hc.Path // an empty path is reported, not defaulted
	return &d
}

// irCanaryCheck validates a canary block; false when it cannot be served.
func (t *translator) irCanaryCheck(o *object, field string, c *IngressRouteCanary) bool {
	ok := true
	if c.Service.Port < 1 || c.Service.Port > 65535 {
		t.errorf(o, field+".service.port", "port %d out of range 1-65535", c.Service.Port)
	} else if _, _, sok := t.servicePort(o, field+".service", o.ref.Namespace, c.Service.Name, c.Service.Port, ""); !sok {
		ok = false
	}
	switch {
	case c.Percentage != nil && c.Start != nil:
		t.errorf(o, field, "percentage and start are exclusive")
	case c.Percentage != nil && (*c.Percentage < 0 || *c.Percentage > 100):
		t.errorf(o, field+".percentage", "%v out of range 0-100", *c.Percentage)
	case c.Start != nil && *c.Start < 0:
		t.errorf(o, field+".start", "must not be negative")
	}
	if c.Steps != nil && *c.Steps <= 0 {
		t.errorf(o, field+".steps", "must be greater than 0")
	}
	if c.Duration != nil && *c.Duration <= 0 {
		t.errorf(o, field+".duration", "must be greater than 0")
	}
	switch model.CanaryHash(c.Hash) {
	case "", model.CanaryHashNone, model.CanaryHashConsumer, model.CanaryHashIP:
	case model.CanaryHashHeader:
		if c.HashHeader == "" {
			t.errorf(o, field+".hashHeader", "required when hash is header")
		}
	default:
		t.errorf(o, field+".hash", "unsupported hash %q: want consumer, ip, header or none", c.Hash)
	}
	return ok
}

// isUnder reports whether match is an element-wise prefix path under prefix.
func isUnder(match, prefix string) bool {
	prefix = trimPrefixPath(prefix)
	match = trimPrefixPath(match)
	if prefix == "/" || match == prefix {
		return true
	}
	return strings.HasPrefix(match, prefix+"/")
}

// irCheck walks from a root, making invalid the objects that close a
// delegation cycle or route outside the prefix delegated to them.
func (t *translator) irCheck(w *irWalk, o *object, prefix string, stack []*object) {
	ir := irOf(o)
	if len(stack) > 1 {
		for i, r := range ir.Spec.Routes {
			if !isUnder(r.Match, prefix) {
				t.errorf(o, fmt.Sprintf("spec.routes[%d].match", i), "%q is outside the prefix %q delegated by %s", r.Match, prefix, stack[len(stack)-2].ref)
				return
			}
		}
	}
	for i, r := range ir.Spec.Routes {
		if r.Delegate == nil || !t.irUsable(w, o) {
			continue
		}
		cref := model.ObjectRef{Group: IngressRouteGroup, Kind: kindIngressRoute, Namespace: delegateNS(r.Delegate, o.ref.Namespace), Name: r.Delegate.Name}
		c := w.objs[cref]
		if c == nil || !t.irUsable(w, c) {
			continue
		}
		if slices.Contains(stack, c) {
			var chain []string
			for _, s := range stack {
				chain = append(chain, s.ref.Namespace+"/"+s.ref.Name)
			}
			chain = append(chain, c.ref.Namespace+"/"+c.ref.Name)
			t.errorf(o, fmt.Sprintf("spec.routes[%d].delegate", i), "delegation cycle: %s", strings.Join(chain, " -> "))
			continue
		}
		key := [2]string{c.ref.String(), r.Match}
		if w.checked[key] {
			continue
		}
		t.irCheck(w, c, r.Match, append(stack, c))
		w.checked[key] = true
	}
}

// irEmit walks from root over valid objects and emits their routes.
func (t *translator) irEmit(w *irWalk, root, o *object, stack []*object) {
	if slices.Contains(stack, o) || w.emitted[[2]model.ObjectRef{root.ref, o.ref}] {
		return
	}
	w.emitted[[2]model.ObjectRef{root.ref, o.ref}] = true
	if _, ok := w.reached[o.ref]; !ok {
		w.reached[o.ref] = root.ref
	}
	stack = append(stack, o)
	vh := irOf(root).Spec.VirtualHost
	host := strings.ToLower(vh.Fqdn)
	if o == root && vh.TLS != nil {
		cert, sref, _ := t.tlsSecret(o, "spec.virtualhost.tls.secretName", o.ref.Namespace, vh.TLS.SecretName, []string{host})
		if cert != nil {
			minv, _ := tlsVersion(vh.TLS.MinimumProtocolVersion)
			t.out.certs = append(t.out.certs, model.Certificate{Hosts: []string{host}, Certificate: cert, MinVersion: minv, Secret: sref, Source: o.ref})
			t.out.used[sref] = true
		}
	}
	for i, r := range irOf(o).Spec.Routes {
		field := fmt.Sprintf("spec.routes[%d]", i)
		if r.Delegate != nil {
			cref := model.ObjectRef{Group: IngressRouteGroup, Kind: kindIngressRoute, Namespace: delegateNS(r.Delegate, o.ref.Namespace), Name: r.Delegate.Name}
			if c := w.objs[cref]; c != nil && t.irUsable(w, c) {
				t.irEmit(w, root, c, stack)
			}
			continue
		}
		cl := t.irCluster(o, field, vh, r)
		if cl == nil {
			continue
		}
		path := trimPrefixPath(r.Match)
		cl.Name = clusterName(o.ref, host, path, model.PathPrefix)
		t.cands = append(t.cands, &routeCand{owner: o, field: field + ".match", route: model.Route{
			Host: host, Path: path, PathType: model.PathPrefix,
			RedirectHTTPS: vh.TLS != nil && !r.PermitInsecure,
			Cluster:       cl, Source: o.ref, Backfilled: o.lkg,
		}})
	}
}

// irCluster builds the weighted cluster of a route. Weights: when no service
// has one, they share evenly; when some do, the others get none; when all
// are zero, they share evenly.
func (t *translator) irCluster(o *object, field string, vh *VirtualHost, r IngressRouteRoute) *model.Cluster {
	cl := &model.Cluster{}
	anySet, sum := false, uint64(0)
	for _, s := range r.Services {
		if s.Weight != nil {
			anySet = true
			sum += uint64(*s.Weight)
		}
	}
	for j, s := range r.Services {
		sf := fmt.Sprintf("%s.services[%d]", field, j)
		so, sp, ok := t.servicePort(o, sf, o.ref.Namespace, s.Name, s.Port, "")
		if !ok {
			return nil
		}
		weight := uint32(1)
		if anySet && sum > 0 {
			weight = 0
			if s.Weight != nil {
				weight = *s.Weight
			}
		}
		b := t.backend(so, sp)
		strategy := firstNonEmpty(s.Strategy, r.Strategy, vh.Strategy)
		hc := s.HealthCheck
		if hc == nil {
			hc = r.HealthCheck
		}
		if hc == nil {
			hc = vh.HealthCheck
		}
		t.setPolicy(o, sf, b, model.Strategy(strategy), t.irHealthCheck(o, sf+".healthCheck", hc))
		if weight == 0 {
			continue
		}
		cl.Backends = append(cl.Backends, model.WeightedBackend{Backend: b, Weight: weight})
	}
	if c := r.Canary; c != nil {
		so, sp, ok := t.servicePort(o, field+".canary.service", o.ref.Namespace, c.Service.Name, c.Service.Port, "")
		if !ok {
			return nil
		}
		can := &model.Canary{
			Backend:          t.backend(so, sp),
			Percentage:       c.Percentage,
			Steps:            DefaultCanarySteps,
			Hash:             model.CanaryHash(c.Hash),
			HashHeader:       c.HashHeader,
			ConsumerHeader:   c.ConsumerHeader,
			OverrideHeader:   c.OverrideHeader,
			UpstreamFallback: c.UpstreamFallback,
		}
		if c.Steps != nil {
			can.Steps = *c.Steps
		}
		if can.Hash == "" {
			can.Hash = model.CanaryHashConsumer
		}
		if can.ConsumerHeader == "" {
			can.ConsumerHeader = DefaultCanaryConsumerHeader
		}
		if c.Percentage == nil {
			can.Start = t.opts.ConfigTime
			if c.Start != nil {
				can.Start = time.Unix(*c.Start, 0).UTC()
			}
			can.Duration = DefaultCanaryDuration
			if c.Duration != nil {
				can.Duration = time.Duration(*c.Duration) * time.Second
			}
		}
		cl.Canary = can
	}
	return cl
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
