package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/revgate/revgate/proxy/config"
)

// IngressRouteResource is the resource of Contour's IngressRoute.
var IngressRouteResource = schema.GroupVersionResource{Group: config.IngressRouteGroup, Version: "v1beta1", Resource: "ingressroutes"}

// labelServiceName links an EndpointSlice to its Service.
const labelServiceName = discoveryv1.LabelServiceName

// indexByService indexes EndpointSlices by "namespace/service".
const indexByService = "service"

// changeKind says which loop an informer event concerns.
type changeKind int

const (
	// changeStructure: an object that may change the rendered snapshot.
	changeStructure changeKind = iota
	// changeEndpoints: an EndpointSlice.
	changeEndpoints
	// changeStatus: only the status of an Ingress or IngressRoute changed
	// (someone, perhaps this controller, wrote it).
	changeStatus
)

// informerCache is the Cache backed by shared informers: one set per
// watched namespace (or one for all namespaces), plus IngressClasses, which
// are cluster-scoped. IngressRoutes are watched once their CRD exists.
type informerCache struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	log    *slog.Logger
	resync time.Duration
	notify func(changeKind)

	classFactory informers.SharedInformerFactory
	classes      cache.SharedIndexInformer
	// sets by namespace; "" is every namespace.
	sets map[string]*namespaceInformers

	mu sync.RWMutex
	// irStarted is true once the IngressRoute informers run and have synced.
	irStarted bool
}

type namespaceInformers struct {
	factory    informers.SharedInformerFactory
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	ingresses  cache.SharedIndexInformer
	services   cache.SharedIndexInformer
	slices     cache.SharedIndexInformer
	secrets    cache.SharedIndexInformer
	irs        cache.SharedIndexInformer
}

var _ Cache = (*informerCache)(nil)

// newInformerCache sets up the informers (nothing runs before start).
// namespaces empty watches every namespace.
func newInformerCache(client kubernetes.Interface, dyn dynamic.Interface, namespaces []string, resync time.Duration, log *slog.Logger, notify func(changeKind)) (*informerCache, error) {
	c := &informerCache{client: client, dyn: dyn, log: log, resync: resync, notify: notify, sets: map[string]*namespaceInformers{}}
	c.classFactory = informers.NewSharedInformerFactory(client, resync)
	c.classes = c.classFactory.Networking().V1().IngressClasses().Informer()
	if err := c.watch(c.classes, changeStructure, false); err != nil {
		return nil, err
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		s := &namespaceInformers{
			factory:    informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithNamespace(ns)),
			dynFactory: dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, resync, ns, nil),
		}
		s.ingresses = s.factory.Networking().V1().Ingresses().Informer()
		s.services = s.factory.Core().V1().Services().Informer()
		// Only TLS Secrets: the gateway reads no other kind, and the
		// controller should not hold every Secret of the cluster in memory.
		s.secrets = s.factory.InformerFor(&corev1.Secret{}, func(cl kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredSecretInformer(cl, ns, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
			})
		})
		// Only slices linked to a Service.
		s.slices = s.factory.InformerFor(&discoveryv1.EndpointSlice{}, func(cl kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return discoveryinformers.NewFilteredEndpointSliceInformer(cl, ns, resync, cache.Indexers{
				cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
				indexByService: func(obj any) ([]string, error) {
					sl, ok := obj.(*discoveryv1.EndpointSlice)
					if !ok || sl.Labels[labelServiceName] == "" {
						return nil, nil
					}
					return []string{sl.Namespace + "/" + sl.Labels[labelServiceName]}, nil
				},
			}, func(o *metav1.ListOptions) { o.LabelSelector = labelServiceName })
		})
		for _, w := range []struct {
			inf  cache.SharedIndexInformer
			kind changeKind
			spec bool
		}{{s.ingresses, changeStructure, true}, {s.services, changeStructure, false}, {s.secrets, changeStructure, false}, {s.slices, changeEndpoints, false}} {
			if err := c.watch(w.inf, w.kind, w.spec); err != nil {
				return nil, err
			}
		}
		c.sets[ns] = s
	}
	return c, nil
}

// watch strips managedFields from cached objects (a third of an Ingress's
// size) and calls notify on changes. With specOnly, an update that changes
// neither the generation, the labels nor the annotations is a status
// change. A resync (same resourceVersion) is no change at all.
func (c *informerCache) watch(inf cache.SharedIndexInformer, kind changeKind, specOnly bool) error {
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("set informer transform: %w", err)
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.notify(kind) },
		UpdateFunc: func(oldObj, newObj any) {
			om, err1 := metaOf(oldObj)
			nm, err2 := metaOf(newObj)
			if err1 != nil || err2 != nil {
				c.notify(kind)
				return
			}
			if om.GetResourceVersion() == nm.GetResourceVersion() {
				return
			}
			if specOnly && om.GetGeneration() == nm.GetGeneration() && om.GetGeneration() != 0 &&
				maps.Equal(om.GetLabels(), nm.GetLabels()) && maps.Equal(om.GetAnnotations(), nm.GetAnnotations()) {
				c.notify(changeStatus)
				return
			}
			c.notify(kind)
		},
		DeleteFunc: func(any) { c.notify(kind) },
	})
	if err != nil {
		return fmt.Errorf("watch informer: %w", err)
	}
	return nil
}

// stripManagedFields drops metadata.managedFields from an object entering
// the cache; the transform runs before the object is shared, so it may
// change it in place.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	return m, nil
}

// start runs the informers and waits until their caches are filled (or ctx
// is done). IngressRoutes are watched when their CRD is served.
func (c *informerCache) start(ctx context.Context) error {
	c.classFactory.Start(ctx.Done())
	for _, s := range c.sets {
		s.factory.Start(ctx.Done())
	}
	synced := []cache.InformerSynced{c.classes.HasSynced}
	for _, s := range c.sets {
		synced = append(synced, s.ingresses.HasSynced, s.services.HasSynced, s.slices.HasSynced, s.secrets.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	_, err := c.startIngressRoutes(ctx)
	return err
}

// startIngressRoutes starts the IngressRoute informers once the API server
// serves the resource; it reports whether they run. It is called at start
// and then periodically, so that a CRD applied after the controller is
// picked up.
func (c *informerCache) startIngressRoutes(ctx context.Context) (bool, error) {
	c.mu.RLock()
	started := c.irStarted
	c.mu.RUnlock()
	if started {
		return true, nil
	}
	served, err := c.servesIngressRoutes()
	if err != nil || !served {
		return false, err
	}
	var synced []cache.InformerSynced
	for _, s := range c.sets {
		inf := s.dynFactory.ForResource(IngressRouteResource).Informer()
		if err := c.watch(inf, changeStructure, true); err != nil {
			return false, err
		}
		s.dynFactory.Start(ctx.Done())
		synced = append(synced, inf.HasSynced)
		s.irs = inf
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return false, ctx.Err()
	}
	c.mu.Lock()
	c.irStarted = true
	c.mu.Unlock()
	c.log.Info("watching IngressRoutes", "resource", IngressRouteResource.String())
	c.notify(changeStructure)
	return true, nil
}

// servesIngressRoutes asks the API server's discovery for the resource.
func (c *informerCache) servesIngressRoutes() (bool, error) {
	list, err := c.client.Discovery().ServerResourcesForGroupVersion(IngressRouteResource.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", IngressRouteResource.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == IngressRouteResource.Resource {
			return true, nil
		}
	}
	return false, nil
}

// set returns the informers that watch namespace ns.
func (c *informerCache) set(ns string) *namespaceInformers {
	if s, ok := c.sets[metav1.NamespaceAll]; ok {
		return s
	}
	return c.sets[ns]
}

func listAs[T any](inf cache.SharedIndexInformer) []T {
	objs := inf.GetStore().List()
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func getAs[T any](inf cache.SharedIndexInformer, ns, name string) T {
	var zero T
	if inf == nil {
		return zero
	}
	o, ok, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return zero
	}
	t, _ := o.(T)
	return t
}

// IngressClasses lists the cached IngressClasses.
func (c *informerCache) IngressClasses() []*networkingv1.IngressClass {
	return listAs[*networkingv1.IngressClass](c.classes)
}

// Ingresses lists the cached Ingresses of every watched namespace.
func (c *informerCache) Ingresses() []*networkingv1.Ingress {
	var out []*networkingv1.Ingress
	for _, ns := range c.namespaces() {
		out = append(out, listAs[*networkingv1.Ingress](c.sets[ns].ingresses)...)
	}
	return out
}

// IngressRoutes lists the cached IngressRoutes (none before their CRD exists).
func (c *informerCache) IngressRoutes() []*unstructured.Unstructured {
	c.mu.RLock()
	started := c.irStarted
	c.mu.RUnlock()
	if !started {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, ns := range c.namespaces() {
		out = append(out, listAs[*unstructured.Unstructured](c.sets[ns].irs)...)
	}
	return out
}

// Ingress returns a cached Ingress.
func (c *informerCache) Ingress(ns, name string) *networkingv1.Ingress {
	s := c.set(ns)
	if s == nil {
		return nil
	}
	return getAs[*networkingv1.Ingress](s.ingresses, ns, name)
}

// Service returns a cached Service.
func (c *informerCache) Service(ns, name string) *corev1.Service {
	s := c.set(ns)
	if s == nil {
		return nil
	}
	return getAs[*corev1.Service](s.services, ns, name)
}

// Secret returns a cached TLS Secret.
func (c *informerCache) Secret(ns, name string) *corev1.Secret {
	s := c.set(ns)
	if s == nil {
		return nil
	}
	return getAs[*corev1.Secret](s.secrets, ns, name)
}

// EndpointSlices returns the cached slices of a Service.
func (c *informerCache) EndpointSlices(ns, service string) []*discoveryv1.EndpointSlice {
	s := c.set(ns)
	if s == nil {
		return nil
	}
	objs, err := s.slices.GetIndexer().ByIndex(indexByService, ns+"/"+service)
	if err != nil {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, sl)
		}
	}
	return out
}

func (c *informerCache) namespaces() []string {
	return slices.Sorted(maps.Keys(c.sets))
}
