package controller

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/revgate/revgate/installer"
)

// EmptySliceSuffix ends the name of the EndpointSlice without endpoints
// that the live endpoints file holds for a served Service with no
// EndpointSlice: <service>.revgate-no-endpoints. A Service name holds no
// dot, so no slice of another Service is named so by the EndpointSlice
// controller.
const EmptySliceSuffix = ".revgate-no-endpoints"

// labelManagedBy is the EndpointSlice label naming the controller that
// manages a slice; the empty slices say they are revgate's.
const labelManagedBy = "endpointslice.kubernetes.io/managed-by"

// managedBy is the value of labelManagedBy on the empty slices.
const managedBy = "revgate.io/controller"

// publishedServices remembers the Services of published revisions, which
// never change once a revision is written.
type publishedServices struct {
	mu sync.Mutex
	// byRevision holds the Services of the revisions published at the
	// last look.
	byRevision map[int][]types.NamespacedName
}

// liveSlices are the live endpoints of the Services the gateway serves:
// those the selection names, with their slices (selected: the snapshot's
// rendered ones; nil: read from the cache), and those of the published
// revisions that the selection no longer names, since a node may serve an
// older revision for long (its startup monitor fell back from the newer
// one, or a node-by-node rollout holds the newer one back) and that
// revision's Services must not keep stale endpoints meanwhile.
//
// Every such Service without an EndpointSlice gets an empty one (see
// emptySlice): by the live endpoints file's rules, a Service with no slice
// in the file keeps the endpoints its revision was cut with, which are
// stale once its last slice is gone (scaled to zero, slices deleted), where
// a Service with only an empty slice has no endpoint and the gateway
// answers 503. The list is sorted by namespace and name.
func (c *Controller) liveSlices(sel *Selection, selected []discoveryv1.EndpointSlice) []discoveryv1.EndpointSlice {
	out := slices.Clone(selected)
	if selected == nil {
		for _, sl := range endpointSlices(c.cacheView, sel.ServiceRefs) {
			out = append(out, *cleanEndpointSlice(sl))
		}
	}
	named := make(map[types.NamespacedName]bool, len(sel.ServiceRefs))
	for _, ref := range sel.ServiceRefs {
		named[ref] = true
	}
	var older []types.NamespacedName
	for _, ref := range c.published.services(c) {
		if !named[ref] && c.watched(ref.Namespace) {
			older = append(older, ref)
		}
	}
	for _, sl := range endpointSlices(c.cacheView, older) {
		out = append(out, *cleanEndpointSlice(sl))
	}

	withSlice := map[types.NamespacedName]bool{}
	taken := map[types.NamespacedName]bool{}
	for _, sl := range out {
		withSlice[types.NamespacedName{Namespace: sl.Namespace, Name: sl.Labels[discoveryv1.LabelServiceName]}] = true
		taken[types.NamespacedName{Namespace: sl.Namespace, Name: sl.Name}] = true
	}
	for _, ref := range append(slices.Clone(sel.ServiceRefs), older...) {
		if withSlice[ref] {
			continue
		}
		svc := c.cacheView.Service(ref.Namespace, ref.Name)
		if svc != nil && svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue // no endpoints: the gateway resolves its name
		}
		es := emptySlice(ref, svc)
		if taken[types.NamespacedName{Namespace: es.Namespace, Name: es.Name}] {
			continue // a slice of that name exists: a duplicate would void the file
		}
		out = append(out, es)
	}
	sortSlices(out)
	return out
}

// emptySlice is the EndpointSlice without endpoints of a served Service that
// has none: named <service>.revgate-no-endpoints, labelled with the Service
// (kubernetes.io/service-name) and as revgate's, of the Service's first IP
// family (svc may be nil: the Service is gone).
func emptySlice(ref types.NamespacedName, svc *corev1.Service) discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if svc != nil && len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		family = discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: ref.Name + EmptySliceSuffix, Namespace: ref.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: ref.Name, labelManagedBy: managedBy}},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{},
	}
}

// watched reports whether the controller watches namespace ns.
func (c *Controller) watched(ns string) bool {
	return len(c.opts.Namespaces) == 0 || slices.Contains(c.opts.Namespaces, ns)
}

// services lists the Services of the revisions published now, from the file
// names of their rendered Services (configmaps/services/<ns>.<name>.yaml);
// a revision the controller did not render has none. Unreadable manifests
// or folders count as none: the selection's Services are written anyway.
func (p *publishedServices) services(c *Controller) []types.NamespacedName {
	pub, err := c.opts.Layout.PublishedSlots(c.fs)
	if err != nil {
		c.log.Debug("reading the published revisions for their Services failed", "err", err)
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := make(map[int][]types.NamespacedName, len(pub))
	var out []types.NamespacedName
	for _, s := range pub {
		if s.Err != nil {
			continue
		}
		refs, ok := p.byRevision[s.Revision]
		if !ok {
			refs = revisionServices(c, s.Revision)
		}
		next[s.Revision] = refs
		out = append(out, refs...)
	}
	p.byRevision = next
	return out
}

// revisionServices reads the Services rendered into revision n.
func revisionServices(c *Controller, n int) []types.NamespacedName {
	dir := filepath.Join(c.opts.Layout.RevisionDir(n), installer.ConfigMapsDir, folderServices)
	entries, err := c.fs.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Debug("reading a revision's Services failed", "revision", n, "err", err)
		}
		return nil
	}
	var out []types.NamespacedName
	for _, e := range entries {
		ns, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".yaml"), ".")
		if e.IsDir() || !ok || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	}
	return out
}
