package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/revgate/revgate/proxy/model"
)

// dep is an edge of the dependency graph: the object depends on ref.
type dep struct {
	ref model.ObjectRef
	// delegation marks an IngressRoute delegating to the object: the object
	// is cut off only when every delegating parent is gone.
	delegation bool
}

// translation is the outcome of translating one store.
type translation struct {
	routes   []model.Route
	backends map[string]*model.Backend
	certs    []model.Certificate
	problems []model.Problem
	// broken are the objects with an error, with the first error message.
	broken map[model.ObjectRef]string
	// deps are, per object, the objects it depends on.
	deps map[model.ObjectRef][]dep
	// used are the objects contributing to what is served.
	used map[model.ObjectRef]bool
	// ignored are objects not for revgate, with the reason.
	ignored map[model.ObjectRef]string
	// ir is the delegation outcome of every translated IngressRoute.
	ir map[model.ObjectRef]irOutcome
}

// irOutcome is the Contour status of an IngressRoute.
type irOutcome struct {
	status      model.Status
	description string
	root        *model.ObjectRef
}

// translator translates one store. gone are objects removed from the store by
// fallback, with the reason; references to them are not errors of the
// referring object.
type translator struct {
	opts Options
	// now is when certificates are checked for expiry.
	now  time.Time
	st   *store
	gone map[model.ObjectRef]string
	// strictGone (--fallback=off) makes a reference to a gone object an error
	// of the referring object instead of leaving it to fallback.
	strictGone bool
	out        *translation

	secrets map[model.ObjectRef]*tls.Certificate
	// badSecrets are TLS Secrets that failed validation: an error of the
	// Secret once a route references it (see tlsSecret), a warning when
	// nothing does.
	badSecrets map[model.ObjectRef]*secretProblem
	// opinions remember who set a backend's strategy and health check.
	opinions map[string]model.ObjectRef
	cands    []*routeCand
	defaults []*routeCand
}

// routeCand is a route before conflicts are resolved.
type routeCand struct {
	route model.Route
	owner *object
	field string
}

func translate(opts Options, now time.Time, st *store, gone map[model.ObjectRef]string, strictGone bool) *translation {
	t := &translator{
		opts:       opts,
		now:        now,
		st:         st,
		gone:       gone,
		strictGone: strictGone,
		out: &translation{
			backends: map[string]*model.Backend{},
			broken:   map[model.ObjectRef]string{},
			deps:     map[model.ObjectRef][]dep{},
			used:     map[model.ObjectRef]bool{},
			ignored:  map[model.ObjectRef]string{},
			ir:       map[model.ObjectRef]irOutcome{},
		},
		secrets:    map[model.ObjectRef]*tls.Certificate{},
		badSecrets: map[model.ObjectRef]*secretProblem{},
		opinions:   map[string]model.ObjectRef{},
	}
	objs := make([]*object, 0, len(st.byRef))
	for _, o := range st.objects {
		// Objects the loader ignored (unknown kinds, duplicates) keep their
		// reason on the object: a duplicate shares its reference with the
		// object that is used.
		if o.obj == nil || o.ignored != "" {
			continue
		}
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return refLess(objs[i].ref, objs[j].ref) })
	// Leaves first, so that a dependant can tell a broken dependency.
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *corev1.Secret:
			t.secret(o, v)
		case *corev1.Service:
			t.service(o, v)
		case *discoveryv1.EndpointSlice:
			t.endpointSlice(o, v)
		}
	}
	classes := t.ingressClasses(objs)
	var irs []*object
	for _, o := range objs {
		switch o.obj.(type) {
		case *IngressRoute:
			irs = append(irs, o)
		}
	}
	t.ingresses(objs, classes)
	t.ingressRoutes(irs)
	t.mergeRoutes()
	t.unreferencedSecrets()
	return t.out
}

func refLess(a, b model.ObjectRef) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.Group < b.Group
}

func (t *translator) problem(o *object, sev model.Severity, field, format string, args ...any) {
	p := model.Problem{File: o.file, Object: o.ref, Field: field, Message: fmt.Sprintf(format, args...), Severity: sev}
	t.out.problems = append(t.out.problems, p)
	if sev == model.SeverityError {
		if _, ok := t.out.broken[o.ref]; !ok {
			msg := p.Message
			if field != "" {
				msg = field + ": " + msg
			}
			t.out.broken[o.ref] = msg
		}
	}
}

func (t *translator) errorf(o *object, field, format string, args ...any) {
	t.problem(o, model.SeverityError, field, format, args...)
}

func (t *translator) warnf(o *object, field, format string, args ...any) {
	t.problem(o, model.SeverityWarning, field, format, args...)
}

func (t *translator) addDep(o *object, ref model.ObjectRef, delegation bool) {
	for _, d := range t.out.deps[o.ref] {
		if d.ref == ref {
			return
		}
	}
	t.out.deps[o.ref] = append(t.out.deps[o.ref], dep{ref: ref, delegation: delegation})
}

// unusable reports whether ref is broken in this translation or was removed
// by fallback: objects depending on it are not translated (fallback decides
// what happens to them).
func (t *translator) unusable(ref model.ObjectRef) bool {
	if _, ok := t.out.broken[ref]; ok {
		return true
	}
	_, ok := t.gone[ref]
	return ok
}

// goneRef reports, with --fallback=off, a reference to an object removed as
// broken as an error of the referring object.
func (t *translator) goneRef(o *object, field string, ref model.ObjectRef) {
	if why, ok := t.gone[ref]; ok && t.strictGone {
		t.errorf(o, field, "%s %s/%s is invalid: %s", strings.ToLower(ref.Kind), ref.Namespace, ref.Name, why)
	}
}

// lookup returns the object for ref; missing is true when it does not exist
// at all (as opposed to unusable).
func (t *translator) lookup(ref model.ObjectRef) (o *object, missing bool) {
	if o := t.st.byRef[ref]; o != nil && o.ignored == "" {
		return o, false
	}
	if _, ok := t.gone[ref]; ok {
		return nil, false
	}
	return nil, true
}

// --- Secrets -------------------------------------------------------------

// secret validates a TLS Secret (see isTLSSecret); other Secrets are not
// revgate's to judge and are ignored. A TLS Secret that does not validate is
// not an error yet: that waits for a route to reference it.
func (t *translator) secret(o *object, s *corev1.Secret) {
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	if !isTLSSecret(s.Type, data) {
		t.out.ignored[o.ref] = fmt.Sprintf("secret of type %q, not %s", secretType(s.Type), corev1.SecretTypeTLS)
		return
	}
	bad := func(field, format string, args ...any) {
		t.badSecrets[o.ref] = &secretProblem{o: o, field: field, msg: fmt.Sprintf(format, args...)}
	}
	crt, key := data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]
	switch {
	case len(crt) == 0:
		bad("data[tls.crt]", "missing certificate")
		return
	case len(key) == 0:
		bad("data[tls.key]", "missing private key")
		return
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		bad("data[tls.crt]", "invalid key pair: %v", err)
		return
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			bad("data[tls.crt]", "invalid certificate: %v", err)
			return
		}
		cert.Leaf = leaf
	}
	// An expired certificate is still served (clients decide), but said.
	if l := cert.Leaf; t.now.After(l.NotAfter) {
		t.warnf(o, "data[tls.crt]", "certificate expired at %s", l.NotAfter.UTC().Format(time.RFC3339))
	} else if t.now.Before(l.NotBefore) {
		t.warnf(o, "data[tls.crt]", "certificate not valid before %s", l.NotBefore.UTC().Format(time.RFC3339))
	}
	t.secrets[o.ref] = &cert
}

// tlsSecret resolves a TLS secret referenced by o at field; ok is false when
// o cannot be served with it (an error on o, or an unusable secret).
func (t *translator) tlsSecret(o *object, field, namespace, name string, hosts []string) (*tls.Certificate, model.ObjectRef, bool) {
	ref := model.ObjectRef{Kind: kindSecret, Namespace: namespace, Name: name}
	if name == "" {
		t.errorf(o, field, "secret name is empty")
		return nil, ref, false
	}
	t.addDep(o, ref, false)
	t.referenceSecret(ref)
	so, missing := t.lookup(ref)
	if missing {
		if other := t.st.byRef[ref]; other != nil && other.ignored != "" {
			t.errorf(o, field, "secret %s/%s: %s", namespace, name, other.ignored)
		} else {
			t.errorf(o, field, "secret %s/%s not found", namespace, name)
		}
		return nil, ref, false
	}
	if so == nil || t.unusable(ref) {
		t.goneRef(o, field, ref)
		return nil, ref, false
	}
	if why, ok := t.out.ignored[ref]; ok {
		t.errorf(o, field, "secret %s/%s: %s", namespace, name, why)
		return nil, ref, false
	}
	cert := t.secrets[ref]
	if cert == nil {
		return nil, ref, false
	}
	for _, h := range hosts {
		if !certCovers(cert.Leaf, h) {
			t.errorf(o, field, "certificate of secret %s/%s does not cover host %q", namespace, name, h)
			return nil, ref, false
		}
	}
	return cert, ref, true
}

// certCovers reports whether the certificate is valid for host; a wildcard
// host needs the same wildcard among the certificate's names.
func certCovers(leaf *x509.Certificate, host string) bool {
	if strings.HasPrefix(host, "*.") {
		for _, n := range leaf.DNSNames {
			if strings.EqualFold(n, host) {
				return true
			}
		}
		return false
	}
	return leaf.VerifyHostname(host) == nil
}

// --- Services and EndpointSlices -------------------------------------------

func (t *translator) service(o *object, s *corev1.Service) {
	for _, sl := range t.st.slices[o.ref.Namespace+"/"+o.ref.Name] {
		t.addDep(o, sl.ref, false)
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		if s.Spec.ExternalName == "" {
			t.errorf(o, "spec.externalName", "required for type ExternalName")
		} else if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(s.Spec.ExternalName, ".")); len(errs) > 0 {
			t.errorf(o, "spec.externalName", "invalid DNS name %q: %s", s.Spec.ExternalName, strings.Join(errs, "; "))
		}
	}
	names := map[string]bool{}
	for i, p := range s.Spec.Ports {
		if p.Port < 1 || p.Port > 65535 {
			t.errorf(o, fmt.Sprintf("spec.ports[%d].port", i), "port %d out of range 1-65535", p.Port)
		}
		if names[p.Name] {
			t.errorf(o, fmt.Sprintf("spec.ports[%d].name", i), "duplicate port name %q", p.Name)
		}
		names[p.Name] = true
		if p.TargetPort.IntVal < 0 || p.TargetPort.IntVal > 65535 {
			t.errorf(o, fmt.Sprintf("spec.ports[%d].targetPort", i), "port %d out of range 1-65535", p.TargetPort.IntVal)
		}
	}
	if ip := s.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone && net.ParseIP(ip) == nil {
		t.errorf(o, "spec.clusterIP", "invalid IP address %q", ip)
	}
}

func (t *translator) endpointSlice(o *object, s *discoveryv1.EndpointSlice) {
	if s.Labels[labelServiceName] == "" {
		t.warnf(o, "metadata.labels", "no %s label: not linked to any Service", labelServiceName)
	}
	for _, fe := range checkEndpointSlice(s) {
		t.errorf(o, fe.field, "%s", fe.message)
	}
}

// fieldError is a problem with one field of an object.
type fieldError struct {
	field, message string
}

// checkEndpointSlice returns what makes an EndpointSlice unusable: an
// unsupported address type, a port out of range, an endpoint without
// addresses or with an address that does not match the address type.
// Loopback addresses are accepted (the upstreams of an edge host are often
// local processes). The revision loader and live endpoints share it.
func checkEndpointSlice(s *discoveryv1.EndpointSlice) []fieldError {
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		return []fieldError{{"addressType", fmt.Sprintf("unsupported address type %q", s.AddressType)}}
	}
	var out []fieldError
	for i, p := range s.Ports {
		if p.Port != nil && (*p.Port < 1 || *p.Port > 65535) {
			out = append(out, fieldError{fmt.Sprintf("ports[%d].port", i), fmt.Sprintf("port %d out of range 1-65535", *p.Port)})
		}
	}
	for i, ep := range s.Endpoints {
		if len(ep.Addresses) == 0 {
			out = append(out, fieldError{fmt.Sprintf("endpoints[%d].addresses", i), "no address"})
		}
		for j, a := range ep.Addresses {
			field := fmt.Sprintf("endpoints[%d].addresses[%d]", i, j)
			switch s.AddressType {
			case discoveryv1.AddressTypeFQDN:
				if errs := validation.IsDNS1123Subdomain(a); len(errs) > 0 {
					out = append(out, fieldError{field, fmt.Sprintf("invalid DNS name %q", a)})
				}
			default:
				ip := net.ParseIP(a)
				if ip == nil || (s.AddressType == discoveryv1.AddressTypeIPv4) != (ip.To4() != nil) {
					out = append(out, fieldError{field, fmt.Sprintf("invalid %s address %q", s.AddressType, a)})
				}
			}
		}
	}
	return out
}

// servicePort resolves a Service port by number or name (number 0 and name
// "": the Service's only port). ok is false when o cannot be served.
func (t *translator) servicePort(o *object, field, namespace, name string, number int32, portName string) (*object, *corev1.ServicePort, bool) {
	ref := model.ObjectRef{Kind: kindService, Namespace: namespace, Name: name}
	if name == "" {
		t.errorf(o, field+".name", "service name is empty")
		return nil, nil, false
	}
	t.addDep(o, ref, false)
	so, missing := t.lookup(ref)
	if missing {
		t.errorf(o, field+".name", "service %s/%s not found", namespace, name)
		return nil, nil, false
	}
	if so == nil || t.unusable(ref) {
		t.goneRef(o, field+".name", ref)
		return nil, nil, false
	}
	svc := so.obj.(*corev1.Service)
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		switch {
		case number != 0 && sp.Port == number,
			number == 0 && portName != "" && sp.Name == portName,
			number == 0 && portName == "" && len(svc.Spec.Ports) == 1:
			return so, sp, true
		}
	}
	switch {
	case number != 0:
		t.errorf(o, field+".port", "service %s/%s has no port %d", namespace, name, number)
	case portName != "":
		t.errorf(o, field+".port", "service %s/%s has no port named %q", namespace, name, portName)
	default:
		t.errorf(o, field+".port", "no port given and service %s/%s does not have exactly one port", namespace, name)
	}
	return nil, nil, false
}

// backend returns the shared backend of a Service port, creating it.
func (t *translator) backend(so *object, sp *corev1.ServicePort) *model.Backend {
	key := so.ref.Namespace + "/" + so.ref.Name + ":" + strconv.Itoa(int(sp.Port))
	if b := t.out.backends[key]; b != nil {
		return b
	}
	svc := so.obj.(*corev1.Service)
	b := &model.Backend{
		Key:          key,
		Service:      so.ref,
		TLS:          sp.Name == "https" || (sp.AppProtocol != nil && strings.EqualFold(*sp.AppProtocol, "https")),
		Port:         model.ServicePort{Name: sp.Name, Number: sp.Port, TargetPort: sp.TargetPort.IntVal},
		ExternalName: svc.Spec.Type == corev1.ServiceTypeExternalName,
	}
	b.Endpoints = t.endpoints(so, svc, b)
	t.out.backends[key] = b
	return b
}

func (t *translator) endpoints(so *object, svc *corev1.Service, b *model.Backend) []string {
	if b.ExternalName {
		return []string{net.JoinHostPort(strings.TrimSuffix(svc.Spec.ExternalName, "."), strconv.Itoa(int(b.Port.Number)))}
	}
	var slices []*discoveryv1.EndpointSlice
	for _, slo := range t.st.slices[so.ref.Namespace+"/"+so.ref.Name] {
		if slo.ignored != "" || t.unusable(slo.ref) {
			continue
		}
		slices = append(slices, slo.obj.(*discoveryv1.EndpointSlice))
	}
	if len(slices) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return []string{net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(b.Port.Number)))}
	}
	return sliceEndpoints(b.Port, slices)
}

// sliceEndpoints returns the sorted, distinct "host:port" addresses that
// EndpointSlices give a Service port: the slice port named like the Service
// port (a slice without ports serves the target port, or the port itself
// when the target port is named or unset), for every endpoint not marked
// unready. The revision loader and live endpoints share it.
func sliceEndpoints(sp model.ServicePort, slices []*discoveryv1.EndpointSlice) []string {
	out := []string{}
	for _, sl := range slices {
		port := int32(0)
		if len(sl.Ports) == 0 {
			port = sp.TargetPort
			if port == 0 {
				port = sp.Number
			}
		}
		for _, p := range sl.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == sp.Name && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if port == 0 {
			continue
		}
		ps := strconv.Itoa(int(port))
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				out = append(out, net.JoinHostPort(a, ps))
			}
		}
	}
	sort.Strings(out)
	return dedupe(out)
}

func dedupe(s []string) []string {
	if len(s) < 2 {
		return s
	}
	j := 1
	for i := 1; i < len(s); i++ {
		if s[i] != s[j-1] {
			s[j] = s[i]
			j++
		}
	}
	return s[:j]
}

// markBackendUsed marks a backend's Service and EndpointSlices in use.
func (t *translator) markBackendUsed(b *model.Backend) {
	t.out.used[b.Service] = true
	for _, sl := range t.st.slices[b.Service.Namespace+"/"+b.Service.Name] {
		if sl.ignored == "" && !t.unusable(sl.ref) {
			t.out.used[sl.ref] = true
		}
	}
}

// setPolicy applies a strategy and health check to a backend; the first
// object to ask wins, a different later ask is a warning on that object.
func (t *translator) setPolicy(o *object, field string, b *model.Backend, strategy model.Strategy, hc *model.HealthCheck) {
	if strategy == "" && hc == nil {
		return
	}
	if prev, ok := t.opinions[b.Key]; ok {
		if b.Strategy != strategy || !sameHealthCheck(b.HealthCheck, hc) {
			t.warnf(o, field, "backend %s already has strategy %q and health check %s from %s; keeping those", b.Key, b.Strategy, describeHC(b.HealthCheck), prev)
		}
		return
	}
	t.opinions[b.Key] = o.ref
	b.Strategy = strategy
	b.HealthCheck = hc
}

func sameHealthCheck(a, b *model.HealthCheck) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func describeHC(h *model.HealthCheck) string {
	if h == nil {
		return "none"
	}
	return fmt.Sprintf("%s every %s", h.Path, h.Interval)
}

// --- TLS versions ----------------------------------------------------------

func tlsVersion(v string) (uint16, bool) {
	switch v {
	case "", "1.2":
		return tls.VersionTLS12, true
	case "1.1":
		return tls.VersionTLS11, true
	case "1.3":
		return tls.VersionTLS13, true
	}
	return 0, false
}
