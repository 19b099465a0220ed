package controller

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/revgate/revgate/proxy/config"
)

// Cache is the controller's view of the cluster: what the informers hold.
// Listings are in any order; lookups return nil when the object is absent.
type Cache interface {
	IngressClasses() []*networkingv1.IngressClass
	Ingresses() []*networkingv1.Ingress
	IngressRoutes() []*unstructured.Unstructured
	Service(namespace, name string) *corev1.Service
	// EndpointSlices are the slices labelled kubernetes.io/service-name: service.
	EndpointSlices(namespace, service string) []*discoveryv1.EndpointSlice
	Secret(namespace, name string) *corev1.Secret
}

// Selection is what the gateway serves, and the Services whose endpoints
// it needs.
type Selection struct {
	Objects
	// ServiceRefs are the Services named by the selected objects, found or
	// not: whose EndpointSlices the gateway needs.
	ServiceRefs []types.NamespacedName
}

// selectObjects picks from the cache what the gateway serves: the
// IngressClasses and Ingresses that the proxy's class rules (opts) give to
// revgate, every IngressRoute, and the Services (with their EndpointSlices)
// and Secrets they name. Everything is sorted by namespace and name.
func selectObjects(opts config.Options, c Cache) *Selection {
	sel := &Selection{}
	classes := c.IngressClasses()
	sortMeta(classes)
	filter := config.NewClassFilter(opts, classes)
	for _, ic := range classes {
		if filter.ClassServed(ic) {
			sel.IngressClasses = append(sel.IngressClasses, ic)
		}
	}
	services := map[types.NamespacedName]bool{}
	secrets := map[types.NamespacedName]bool{}
	ings := c.Ingresses()
	sortMeta(ings)
	for _, ing := range ings {
		if ok, _ := filter.IngressServed(ing); !ok {
			continue
		}
		sel.Ingresses = append(sel.Ingresses, ing)
		for _, ref := range ingressServices(ing) {
			services[ref] = true
		}
		for _, t := range ing.Spec.TLS {
			secrets[types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}] = true
		}
	}
	irs := c.IngressRoutes()
	sortMeta(irs)
	for _, u := range irs {
		sel.IngressRoutes = append(sel.IngressRoutes, u)
		svcs, secret := ingressRouteRefs(u)
		for _, ref := range svcs {
			services[ref] = true
		}
		if secret.Name != "" {
			secrets[secret] = true
		}
	}
	for _, ref := range sortedRefs(services) {
		sel.ServiceRefs = append(sel.ServiceRefs, ref)
		svc := c.Service(ref.Namespace, ref.Name)
		if svc == nil {
			continue
		}
		sel.Services = append(sel.Services, svc)
		slices := c.EndpointSlices(ref.Namespace, ref.Name)
		sortMeta(slices)
		sel.EndpointSlices = append(sel.EndpointSlices, slices...)
	}
	for _, ref := range sortedRefs(secrets) {
		if s := c.Secret(ref.Namespace, ref.Name); s != nil {
			sel.Secrets = append(sel.Secrets, s)
		}
	}
	return sel
}

// endpointSlices lists the EndpointSlices of the given Services, sorted.
func endpointSlices(c Cache, services []types.NamespacedName) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, ref := range services {
		slices := c.EndpointSlices(ref.Namespace, ref.Name)
		sortMeta(slices)
		out = append(out, slices...)
	}
	return out
}

// ingressServices are the Services an Ingress's backends name.
func ingressServices(ing *networkingv1.Ingress) []types.NamespacedName {
	var out []types.NamespacedName
	add := func(b *networkingv1.IngressBackend) {
		if b != nil && b.Service != nil && b.Service.Name != "" {
			out = append(out, types.NamespacedName{Namespace: ing.Namespace, Name: b.Service.Name})
		}
	}
	add(ing.Spec.DefaultBackend)
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for i := range r.HTTP.Paths {
			add(&r.HTTP.Paths[i].Backend)
		}
	}
	return out
}

// ingressRouteRefs are the Services (route services and canaries) and the
// TLS Secret an IngressRoute names, all in its namespace. An object that
// does not decode names nothing: the gateway reports it invalid.
func ingressRouteRefs(u *unstructured.Unstructured) ([]types.NamespacedName, types.NamespacedName) {
	var ir config.IngressRoute
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ir); err != nil {
		return nil, types.NamespacedName{}
	}
	ns := u.GetNamespace()
	var svcs []types.NamespacedName
	for _, r := range ir.Spec.Routes {
		for _, s := range append(append([]config.IngressRouteService(nil), r.Services...), r.Service...) {
			if s.Name != "" {
				svcs = append(svcs, types.NamespacedName{Namespace: ns, Name: s.Name})
			}
		}
		if r.Canary != nil && r.Canary.Service.Name != "" {
			svcs = append(svcs, types.NamespacedName{Namespace: ns, Name: r.Canary.Service.Name})
		}
	}
	var secret types.NamespacedName
	if vh := ir.Spec.VirtualHost; vh != nil && vh.TLS != nil && vh.TLS.SecretName != "" {
		secret = types.NamespacedName{Namespace: ns, Name: vh.TLS.SecretName}
	}
	return svcs, secret
}

func sortedRefs(m map[types.NamespacedName]bool) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// named is what sortMeta needs of an object.
type named interface {
	GetNamespace() string
	GetName() string
}

// sortMeta sorts objects by namespace, then name.
func sortMeta[T named](objs []T) {
	sort.Slice(objs, func(i, j int) bool {
		if a, b := objs[i].GetNamespace(), objs[j].GetNamespace(); a != b {
			return a < b
		}
		return objs[i].GetName() < objs[j].GetName()
	})
}
