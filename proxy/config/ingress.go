package config

import (
	"crypto/tls"
	"fmt"
	"sort"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/proxy/route"
)

// Annotations of the Ingress class rules.
const (
	annotationIngressClass = "kubernetes.io/ingress.class"
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// classInfo is what the Ingress class rules need to know about the loaded
// IngressClasses.
type classInfo struct {
	// byName are the IngressClass objects by name.
	byName map[string]*object
	// defaults are the default IngressClasses that are ours.
	defaults []*object
}

// ours reports whether an IngressClass is served by revgate: its controller
// is revgate's or its name is the configured class.
func (t *translator) classIsOurs(o *object) bool {
	ic := o.obj.(*networkingv1.IngressClass)
	return ic.Spec.Controller == ControllerName || ic.Name == t.opts.IngressClass
}

func (t *translator) ingressClasses(objs []*object) classInfo {
	ci := classInfo{byName: map[string]*object{}}
	for _, o := range objs {
		ic, ok := o.obj.(*networkingv1.IngressClass)
		if !ok {
			continue
		}
		ci.byName[ic.Name] = o
		if !t.classIsOurs(o) {
			t.out.ignored[o.ref] = fmt.Sprintf("controller %q is not %s", ic.Spec.Controller, ControllerName)
			continue
		}
		if ic.Spec.Controller == "" {
			t.errorf(o, "spec.controller", "required")
		} else if !strings.Contains(ic.Spec.Controller, "/") {
			t.errorf(o, "spec.controller", "%q is not a domain-prefixed path such as %s", ic.Spec.Controller, ControllerName)
		}
		isDefault := false
		if v, ok := ic.Annotations[annotationDefaultClass]; ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				t.errorf(o, "metadata.annotations["+annotationDefaultClass+"]", "%q is not a boolean", v)
			}
			isDefault = b
		}
		if isDefault {
			ci.defaults = append(ci.defaults, o)
		}
	}
	if len(ci.defaults) > 1 {
		for _, o := range ci.defaults {
			t.warnf(o, "metadata.annotations["+annotationDefaultClass+"]", "%d default IngressClasses of revgate; Ingresses without a class use all of them", len(ci.defaults))
		}
	}
	return ci
}

// ingressClassOf applies the class rules to one Ingress: the annotation wins
// over spec.ingressClassName; an Ingress with neither is ours when a default
// IngressClass of ours is loaded. It returns whether the Ingress is ours and
// the IngressClasses it depends on.
func (t *translator) ingressClassOf(o *object, ing *networkingv1.Ingress, ci classInfo) (bool, []*object, string) {
	field := ""
	if ing.Spec.IngressClassName != nil {
		field = *ing.Spec.IngressClassName
	}
	class, annotated := ing.Annotations[annotationIngressClass]
	if annotated && field != "" && field != class {
		t.warnf(o, "spec.ingressClassName", "annotation %s %q wins over spec.ingressClassName %q", annotationIngressClass, class, field)
	}
	if !annotated {
		class = field
	}
	if class == "" {
		if len(ci.defaults) == 0 {
			return false, nil, "no ingress class and no default IngressClass of revgate"
		}
		return true, ci.defaults, ""
	}
	ico := ci.byName[class]
	if class == t.opts.IngressClass {
		if ico != nil {
			return true, []*object{ico}, ""
		}
		return true, nil, ""
	}
	if ico != nil && ico.obj.(*networkingv1.IngressClass).Spec.Controller == ControllerName {
		return true, []*object{ico}, ""
	}
	return false, nil, fmt.Sprintf("ingress class %q is not served by revgate", class)
}

func (t *translator) ingresses(objs []*object, ci classInfo) {
	for _, o := range objs {
		ing, ok := o.obj.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		ours, classes, why := t.ingressClassOf(o, ing, ci)
		if !ours {
			t.out.ignored[o.ref] = why
			continue
		}
		blocked := false
		for _, c := range classes {
			t.addDep(o, c.ref, false)
			if t.unusable(c.ref) && !t.strictGone {
				blocked = true
			}
		}
		t.ingress(o, ing, blocked)
	}
}

// ingress translates one Ingress. Its routes are kept only when the whole
// object is valid; blocked (a broken IngressClass) still validates it.
func (t *translator) ingress(o *object, ing *networkingv1.Ingress, blocked bool) {
	before := len(t.out.problems)
	ns := o.ref.Namespace
	var cands, defaults []*routeCand
	var certs []model.Certificate
	ok := !blocked
	hostsOfRules := []string{}
	for i, rule := range ing.Spec.Rules {
		host, valid := t.host(o, fmt.Sprintf("spec.rules[%d].host", i), rule.Host)
		if !valid {
			ok = false
			continue
		}
		if host != "" {
			hostsOfRules = append(hostsOfRules, host)
		}
		if rule.HTTP == nil {
			continue
		}
		for j, p := range rule.HTTP.Paths {
			field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			path, pt, valid := t.ingressPath(o, field, p)
			b, bvalid := t.ingressBackend(o, field+".backend", ns, p.Backend)
			if !valid || !bvalid {
				ok = false
				continue
			}
			cands = append(cands, &routeCand{owner: o, field: field, route: model.Route{
				Host: host, Path: path, PathType: pt, Source: o.ref, Backfilled: o.lkg,
				Cluster: &model.Cluster{Name: clusterName(o.ref, host, path, pt), Backends: []model.WeightedBackend{{Backend: b, Weight: 1}}},
			}})
		}
	}
	if db := ing.Spec.DefaultBackend; db != nil {
		b, bvalid := t.ingressBackend(o, "spec.defaultBackend", ns, *db)
		if !bvalid {
			ok = false
		} else {
			defaults = append(defaults, &routeCand{owner: o, field: "spec.defaultBackend", route: model.Route{
				Host: "", Path: "/", PathType: model.PathPrefix, Default: true, Source: o.ref, Backfilled: o.lkg,
				Cluster: &model.Cluster{Name: o.ref.String() + "/default", Backends: []model.WeightedBackend{{Backend: b, Weight: 1}}},
			}})
		}
	}
	for i, tl := range ing.Spec.TLS {
		field := fmt.Sprintf("spec.tls[%d]", i)
		hosts := []string{}
		for j, h := range tl.Hosts {
			hh, valid := t.host(o, fmt.Sprintf("%s.hosts[%d]", field, j), h)
			if !valid {
				ok = false
				continue
			}
			if hh != "" {
				hosts = append(hosts, hh)
			}
		}
		if len(tl.Hosts) == 0 {
			hosts = hostsOfRules
		}
		cert, sref, valid := t.tlsSecret(o, field+".secretName", ns, tl.SecretName, hosts)
		if !valid {
			ok = false
			continue
		}
		if len(hosts) == 0 {
			t.warnf(o, field, "covers no host; ignored")
			continue
		}
		certs = append(certs, model.Certificate{Hosts: hosts, Certificate: cert, MinVersion: tls.VersionTLS12, Secret: sref, Source: o.ref})
	}
	if len(ing.Spec.Rules) == 0 && ing.Spec.DefaultBackend == nil {
		t.warnf(o, "spec", "no rules and no defaultBackend: serves nothing")
	}
	if !ok || hasError(t.out.problems[before:]) {
		return
	}
	t.cands = append(t.cands, cands...)
	t.defaults = append(t.defaults, defaults...)
	for _, c := range certs {
		t.out.certs = append(t.out.certs, c)
		t.out.used[c.Secret] = true
	}
}

func hasError(ps []model.Problem) bool {
	for _, p := range ps {
		if p.Severity == model.SeverityError {
			return true
		}
	}
	return false
}

func clusterName(src model.ObjectRef, host, path string, pt model.PathType) string {
	return src.String() + "/" + host + path + "/" + string(pt)
}

// host validates and lower-cases a rule host: exact DNS name or "*." plus a
// DNS name; "" means any host.
func (t *translator) host(o *object, field, h string) (string, bool) {
	if h == "" {
		return "", true
	}
	h = strings.ToLower(h)
	if err := validateHost(h); err != "" {
		t.errorf(o, field, "invalid host %q: %s", h, err)
		return "", false
	}
	return h, true
}

// validateHost returns why h is not a valid Ingress host, "" when it is.
func validateHost(h string) string {
	if h == "*" {
		return "a wildcard alone is not allowed"
	}
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		if strings.Contains(rest, "*") {
			return "a wildcard is allowed only as the whole first label"
		}
		return validateDNSName(rest)
	}
	if strings.Contains(h, "*") {
		return "a wildcard is allowed only as the whole first label"
	}
	if err := validateDNSName(h); err != "" {
		return err
	}
	if len(validation.IsValidIP(nil, h)) == 0 {
		return "must be a DNS name, not an IP address"
	}
	return ""
}

// validateDNSName checks a lower-case DNS name: at most 253 characters,
// labels of at most 63.
func validateDNSName(h string) string {
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	for _, l := range strings.Split(h, ".") {
		if errs := validation.IsDNS1123Label(l); len(errs) > 0 {
			return fmt.Sprintf("label %q: %s", l, strings.Join(errs, "; "))
		}
	}
	return ""
}

// ingressPath validates a path and its type. ImplementationSpecific is
// Prefix; an empty path is "/"; a Prefix path loses its trailing slash.
func (t *translator) ingressPath(o *object, field string, p networkingv1.HTTPIngressPath) (string, model.PathType, bool) {
	pt := model.PathPrefix
	if p.PathType == nil {
		t.warnf(o, field+".pathType", "missing; treated as ImplementationSpecific (Prefix)")
	} else {
		switch *p.PathType {
		case networkingv1.PathTypeExact:
			pt = model.PathExact
		case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		default:
			t.errorf(o, field+".pathType", "unsupported path type %q: want Exact, Prefix or ImplementationSpecific", *p.PathType)
			return "", "", false
		}
	}
	path := p.Path
	if path == "" {
		path = "/"
	}
	path, err := validatePath(path)
	if err != "" {
		t.errorf(o, field+".path", "invalid path %q: %s", p.Path, err)
		return "", "", false
	}
	if pt == model.PathPrefix {
		path = trimPrefixPath(path)
	}
	return path, pt, true
}

// validatePath returns the canonical form of a configured path, the form
// request paths are normalized to before matching (see route.CleanRoutePath),
// or why p is not a valid path.
func validatePath(p string) (string, string) {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "", "must start with '/'"
	case strings.Contains(p, "//"):
		return "", "must not contain consecutive '/'"
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f {
			return "", "must not contain spaces or control characters"
		}
	}
	clean, err := route.CleanRoutePath(p)
	if err != nil {
		return "", err.Error()
	}
	return clean, ""
}

func trimPrefixPath(p string) string {
	if len(p) > 1 {
		return strings.TrimSuffix(p, "/")
	}
	return p
}

// ingressBackend resolves an Ingress backend into a shared backend.
func (t *translator) ingressBackend(o *object, field, ns string, b networkingv1.IngressBackend) (*model.Backend, bool) {
	switch {
	case b.Resource != nil && b.Service != nil:
		t.errorf(o, field, "both service and resource set")
		return nil, false
	case b.Resource != nil:
		t.errorf(o, field+".resource", "resource backends are not supported")
		return nil, false
	case b.Service == nil:
		t.errorf(o, field, "no service")
		return nil, false
	}
	s := b.Service
	if s.Port.Number != 0 && s.Port.Name != "" {
		t.errorf(o, field+".service.port", "both number and name set")
		return nil, false
	}
	so, sp, ok := t.servicePort(o, field+".service", ns, s.Name, s.Port.Number, s.Port.Name)
	if !ok {
		return nil, false
	}
	return t.backend(so, sp), true
}

// --- Route merging ---------------------------------------------------------

type routeKey struct {
	host, path string
	pt         model.PathType
}

// older orders claimants: the oldest creationTimestamp wins, then
// namespace/name (and kind) order.
func older(a, b *object) bool {
	ta, tb := a.meta.CreationTimestamp.Time, b.meta.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.ref.Namespace != b.ref.Namespace {
		return a.ref.Namespace < b.ref.Namespace
	}
	if a.ref.Name != b.ref.Name {
		return a.ref.Name < b.ref.Name
	}
	return a.ref.Kind < b.ref.Kind
}

// mergeRoutes resolves conflicting claims on (host, path, pathType) and on
// the default backend, and builds the final routes and certificates.
func (t *translator) mergeRoutes() {
	win := make(map[routeKey]int, len(t.cands))
	routes := make([]*routeCand, 0, len(t.cands)+1)
	claim := func(c *routeCand, key routeKey) {
		i, ok := win[key]
		if !ok {
			win[key] = len(routes)
			routes = append(routes, c)
			return
		}
		cur := routes[i]
		what := fmt.Sprintf("route %s%s (%s)", key.host, key.path, key.pt)
		if c.route.Default {
			what = "default backend"
		}
		if cur.owner == c.owner {
			t.warnf(c.owner, c.field, "duplicate %s; the first one is used", what)
			return
		}
		if older(c.owner, cur.owner) {
			routes[i] = c
			t.warnf(cur.owner, cur.field, "%s is also claimed by %s, which wins", what, c.owner.ref)
			return
		}
		t.warnf(c.owner, c.field, "%s is also claimed by %s, which wins", what, cur.owner.ref)
	}
	// Stable order: by owner age, so that the first claimant is the winner in
	// the common case and warnings are deterministic.
	sort.SliceStable(t.cands, func(i, j int) bool { return older(t.cands[i].owner, t.cands[j].owner) })
	for _, c := range t.cands {
		claim(c, routeKey{c.route.Host, c.route.Path, c.route.PathType})
	}
	sort.SliceStable(t.defaults, func(i, j int) bool { return older(t.defaults[i].owner, t.defaults[j].owner) })
	defKey := routeKey{"", "/", model.PathPrefix}
	if i, ok := win[defKey]; ok {
		for _, d := range t.defaults {
			t.warnf(d.owner, d.field, "default backend shadowed by the catch-all route of %s", routes[i].owner.ref)
		}
	} else {
		dwin := map[routeKey]int{}
		for _, d := range t.defaults {
			if i, ok := dwin[defKey]; ok {
				cur := routes[i]
				if older(d.owner, cur.owner) {
					routes[i] = d
					t.warnf(cur.owner, cur.field, "default backend is also claimed by %s, which wins", d.owner.ref)
				} else {
					t.warnf(d.owner, d.field, "default backend is also claimed by %s, which wins", cur.owner.ref)
				}
				continue
			}
			dwin[defKey] = len(routes)
			routes = append(routes, d)
		}
	}
	sort.SliceStable(routes, func(i, j int) bool {
		a, b := routes[i].route, routes[j].route
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.PathType < b.PathType
	})
	t.out.routes = make([]model.Route, 0, len(routes))
	for _, c := range routes {
		t.out.routes = append(t.out.routes, c.route)
		t.out.used[c.owner.ref] = true
		for _, wb := range c.route.Cluster.Backends {
			t.markBackendUsed(wb.Backend)
		}
		if c.route.Cluster.Canary != nil {
			t.markBackendUsed(c.route.Cluster.Canary.Backend)
		}
	}
	// Backends referenced by no route (all claims lost) are dropped.
	keep := map[string]*model.Backend{}
	for _, r := range t.out.routes {
		for _, wb := range r.Cluster.Backends {
			keep[wb.Backend.Key] = wb.Backend
		}
		if r.Cluster.Canary != nil {
			keep[r.Cluster.Canary.Backend.Key] = r.Cluster.Canary.Backend
		}
	}
	t.out.backends = keep
	// A host served by two certificates: the older source wins.
	sort.SliceStable(t.out.certs, func(i, j int) bool {
		return older(t.st.byRef[t.out.certs[i].Source], t.st.byRef[t.out.certs[j].Source])
	})
	seen := map[string]model.ObjectRef{}
	certs := t.out.certs[:0]
	for _, c := range t.out.certs {
		var hosts []string
		for _, h := range c.Hosts {
			if prev, ok := seen[h]; ok && prev != c.Source {
				t.warnf(t.st.byRef[c.Source], "", "certificate for host %q is also set by %s, which wins", h, prev)
				continue
			}
			seen[h] = c.Source
			hosts = append(hosts, h)
		}
		if len(hosts) > 0 {
			c.Hosts = hosts
			certs = append(certs, c)
		}
	}
	t.out.certs = certs
}
