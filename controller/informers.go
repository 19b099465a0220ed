package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/doubling"
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
	clock  clock.WithTicker
	resync time.Duration
	notify func(changeKind)
	// ctx is the context of every list and watch call, done when the
	// informers stop: a watch lives as long as they run.
	ctx    context.Context
	cancel context.CancelFunc

	classFactory informers.SharedInformerFactory
	classes      cache.SharedIndexInformer
	// sets by namespace; "" is every namespace.
	sets map[string]*namespaceInformers

	mu sync.RWMutex
	// irStarted is true once the IngressRoute informers run and have synced.
	irStarted bool
}

type namespaceInformers struct {
	ns        string
	factory   informers.SharedInformerFactory
	ingresses cache.SharedIndexInformer
	services  cache.SharedIndexInformer
	slices    cache.SharedIndexInformer
	secrets   cache.SharedIndexInformer
	irs       cache.SharedIndexInformer
}

var _ Cache = (*informerCache)(nil)

// listFunc and watchFunc are a resource's list and watch calls.
type (
	listFunc  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// Retries of a list or watch call while the API server is away.
const (
	patientInitial = 100 * time.Millisecond
	patientMax     = time.Second
)

// patient makes a ListWatch whose calls, while the API server is away
// (connection errors, 5xx, 429), wait for it, trying again at most every
// second, instead of failing. client-go's reflectors back off up to a
// minute after failed calls; with these they never see the outage, and the
// controller resyncs within a second of the server's return. Other errors
// (403, 404, 410) are returned at once, as are calls after the informers
// stopped.
func (c *informerCache) patient(list listFunc, watchFn watchFunc) *cache.ListWatch {
	retry := func(what string, call func(ctx context.Context) error) error {
		delays, warned := doubling.New(patientInitial, patientMax, c.clock), false
		for {
			err := call(c.ctx)
			if err == nil || !installer.Retriable(err) || c.ctx.Err() != nil {
				return err
			}
			if !warned {
				warned = true
				c.log.Warn("the API server is away; waiting for it", "call", what, "err", err)
			}
			t := c.clock.NewTimer(delays.NextBackOff())
			select {
			case <-c.ctx.Done():
				t.Stop()
				return err
			case <-t.C():
			}
		}
	}
	return &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			var out runtime.Object
			err := retry("list", func(ctx context.Context) (err error) {
				out, err = list(ctx, o)
				return err
			})
			return out, err
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			var out watch.Interface
			err := retry("watch", func(ctx context.Context) (err error) {
				out, err = watchFn(ctx, o)
				return err
			})
			return out, err
		},
	}
}

// informer makes a factory's informer for obj from list and watch calls.
func (c *informerCache) informer(f informers.SharedInformerFactory, obj runtime.Object, indexers cache.Indexers, list listFunc, watchFn watchFunc) cache.SharedIndexInformer {
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	return f.InformerFor(obj, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(c.patient(list, watchFn), obj, resync, indexers)
	})
}

// namespaced is the namespace index every namespaced informer has.
var namespaced = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// newInformerCache sets up the informers (nothing runs before start).
// namespaces empty watches every namespace.
func newInformerCache(client kubernetes.Interface, dyn dynamic.Interface, namespaces []string, resync time.Duration, clk clock.WithTicker, log *slog.Logger, notify func(changeKind)) (*informerCache, error) {
	c := &informerCache{client: client, dyn: dyn, log: log, clock: clk, resync: resync, notify: notify, sets: map[string]*namespaceInformers{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.classFactory = informers.NewSharedInformerFactory(client, resync)
	classes := client.NetworkingV1().IngressClasses()
	c.classes = c.informer(c.classFactory, &networkingv1.IngressClass{}, nil,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return classes.List(ctx, o) },
		classes.Watch)
	if err := c.watch(c.classes, changeStructure, false); err != nil {
		return nil, err
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		s := &namespaceInformers{ns: ns, factory: informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithNamespace(ns))}
		ings := client.NetworkingV1().Ingresses(ns)
		s.ingresses = c.informer(s.factory, &networkingv1.Ingress{}, namespaced,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ings.List(ctx, o) },
			ings.Watch)
		svcs := client.CoreV1().Services(ns)
		s.services = c.informer(s.factory, &corev1.Service{}, namespaced,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return svcs.List(ctx, o) },
			svcs.Watch)
		// Only TLS Secrets: the gateway reads no other kind, and the
		// controller should not hold every Secret of the cluster in memory.
		secs := client.CoreV1().Secrets(ns)
		tlsOnly := func(o metav1.ListOptions) metav1.ListOptions {
			o.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
			return o
		}
		s.secrets = c.informer(s.factory, &corev1.Secret{}, namespaced,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return secs.List(ctx, tlsOnly(o))
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return secs.Watch(ctx, tlsOnly(o))
			})
		// Only slices linked to a Service, indexed by it.
		sls := client.DiscoveryV1().EndpointSlices(ns)
		linked := func(o metav1.ListOptions) metav1.ListOptions {
			o.LabelSelector = labelServiceName
			return o
		}
		s.slices = c.informer(s.factory, &discoveryv1.EndpointSlice{}, cache.Indexers{
			cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
			indexByService: func(obj any) ([]string, error) {
				sl, ok := obj.(*discoveryv1.EndpointSlice)
				if !ok || sl.Labels[labelServiceName] == "" {
					return nil, nil
				}
				return []string{sl.Namespace + "/" + sl.Labels[labelServiceName]}, nil
			},
		},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return sls.List(ctx, linked(o))
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return sls.Watch(ctx, linked(o))
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
	go func() {
		<-ctx.Done()
		c.cancel()
	}()
	c.classFactory.Start(ctx.Done())
	for _, s := range c.sets {
		s.factory.Start(ctx.Done())
	}
	synced := map[string]cache.InformerSynced{"IngressClasses": c.classes.HasSynced}
	for ns, s := range c.sets {
		where := " in " + ns
		if ns == metav1.NamespaceAll {
			where = ""
		}
		synced["Ingresses"+where] = s.ingresses.HasSynced
		synced["Services"+where] = s.services.HasSynced
		synced["EndpointSlices"+where] = s.slices.HasSynced
		synced["Secrets"+where] = s.secrets.HasSynced
	}
	if err := c.waitSynced(ctx, synced); err != nil {
		return err
	}
	// Discovery failing now is no reason to stop: it is asked again
	// periodically.
	if _, err := c.startIngressRoutes(ctx); err != nil {
		c.log.Warn("checking for IngressRoutes failed; trying again later", "err", err)
	}
	return nil
}

// waitSynced looks at the informers every syncPoll and names those it
// still waits for every syncReport.
const (
	syncPoll   = 100 * time.Millisecond
	syncReport = 30 * time.Second
)

// waitSynced waits until every informer has synced, naming those it still
// waits for every syncReport: a list the API server refuses (RBAC) would
// otherwise hold the controller without a word.
func (c *informerCache) waitSynced(ctx context.Context, synced map[string]cache.InformerSynced) error {
	tick := c.clock.NewTicker(syncPoll)
	defer tick.Stop()
	last := c.clock.Now()
	for {
		var waiting []string
		for name, done := range synced {
			if !done() {
				waiting = append(waiting, name)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if c.clock.Since(last) >= syncReport {
			last = c.clock.Now()
			slices.Sort(waiting)
			c.log.Warn("still waiting for the caches to fill", "waiting_for", strings.Join(waiting, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C():
		}
	}
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
	synced := map[string]cache.InformerSynced{}
	for _, s := range c.sets {
		irs := c.dyn.Resource(IngressRouteResource).Namespace(s.ns)
		inf := c.informer(s.factory, &unstructured.Unstructured{}, namespaced,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return irs.List(ctx, o) },
			irs.Watch)
		if err := c.watch(inf, changeStructure, true); err != nil {
			return false, err
		}
		s.factory.Start(ctx.Done())
		synced["IngressRoutes in "+s.ns] = inf.HasSynced
		s.irs = inf
	}
	if err := c.waitSynced(ctx, synced); err != nil {
		return false, err
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
