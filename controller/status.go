package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// Contour's IngressRoute status values.
const (
	contourValid    = "valid"
	contourInvalid  = "invalid"
	contourOrphaned = "orphaned"
)

// servedRevision is what the gateway serves: the published revision
// translated by the proxy's own configuration code, with the same options
// and the same last-known-good revision for backfill.
type servedRevision struct {
	// key names the published and last-known-good revisions it was built from.
	key      string
	revision int
	objects  map[model.ObjectRef]model.ObjectStatus
	fallback model.FallbackReport
}

// servedNow translates the newest published revision (the one being rolled
// out beside the serving one, in the slots publish mode; the statuses follow
// it back when the monitor falls back and removes it), again only when the
// published or last-known-good revision changed.
func (c *Controller) servedNow() (*servedRevision, error) {
	l := c.opts.Layout
	pub, err := l.NewestPublishedRevision(c.fs)
	if errors.Is(err, revisions.ErrNoManifest) {
		return &servedRevision{key: "none", objects: map[model.ObjectRef]model.ObjectStatus{}}, nil
	}
	if err != nil {
		return nil, err
	}
	lkg, _ := l.LastKnownGood(c.fs)
	key := fmt.Sprintf("%d/%d", pub, lkg)
	if c.served != nil && c.served.key == key {
		return c.served, nil
	}
	opts := c.opts.Config
	opts.Dirs = []string{l.RevisionDir(pub)}
	opts.LastKnownGoodDir = ""
	opts.Revision = pub
	snap, err := config.Build(opts)
	if err != nil {
		return nil, fmt.Errorf("translate revision %d: %w", pub, err)
	}
	s := &servedRevision{key: key, revision: pub, objects: make(map[model.ObjectRef]model.ObjectStatus, len(snap.Objects)), fallback: snap.Fallback}
	for _, o := range snap.Objects {
		s.objects[o.Object] = o
	}
	c.served = s
	return s, nil
}

// syncStatus writes the statuses of Ingresses and IngressRoutes and records
// the Events of broken, excluded and backfilled objects, for what the
// gateway serves.
func (c *Controller) syncStatus(ctx context.Context) error {
	sel := c.currentSelection()
	if sel == nil {
		return nil
	}
	prev := c.served
	served, err := c.servedNow()
	if err != nil {
		return err
	}
	if served != prev && len(served.fallback.BrokenObjects) > 0 && served.fallback.Status == model.FallbackTriggered {
		f := served.fallback
		c.targetEvent(corev1.EventTypeNormal, EventFallbackSucceeded, fmt.Sprintf("revision %d serves a fallback configuration: %d broken, %d excluded and %d backfilled objects",
			served.revision, len(f.BrokenObjects), len(f.ExcludedObjects), len(f.BackfilledObjects)))
	}
	c.objectEvents(served, sel)
	return errors.Join(c.ingressStatuses(ctx, served, sel), c.ingressRouteStatuses(ctx, served))
}

// liveObject is what an Event's reference needs of a selected object.
type liveObject struct {
	apiVersion string
	uid        types.UID
}

// liveObjects indexes the selected objects by their gateway reference.
func liveObjects(sel *Selection) map[model.ObjectRef]liveObject {
	out := map[model.ObjectRef]liveObject{}
	add := func(group, kind, apiVersion string, m metav1.Object) {
		out[model.ObjectRef{Group: group, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}] = liveObject{apiVersion: apiVersion, uid: m.GetUID()}
	}
	for _, o := range sel.IngressClasses {
		add("networking.k8s.io", "IngressClass", "networking.k8s.io/v1", o)
	}
	for _, o := range sel.Ingresses {
		add("networking.k8s.io", "Ingress", "networking.k8s.io/v1", o)
	}
	for _, o := range sel.IngressRoutes {
		add(config.IngressRouteGroup, "IngressRoute", IngressRouteResource.GroupVersion().String(), o)
	}
	for _, o := range sel.Services {
		add("", "Service", "v1", o)
	}
	for _, o := range sel.EndpointSlices {
		add("discovery.k8s.io", "EndpointSlice", "discovery.k8s.io/v1", o)
	}
	for _, o := range sel.Secrets {
		add("", "Secret", "v1", o)
	}
	return out
}

// objectEvents records an Event on every broken, excluded and backfilled
// object of the served revision, once per object and message: a
// controller watching the same state records nothing more. An object gets
// one Event: backfilled (whose message names the error), else broken, else
// excluded.
func (c *Controller) objectEvents(served *servedRevision, sel *Selection) {
	live := liveObjects(sel)
	seen := map[eventKey]bool{}
	emit := func(fo model.FallbackObject, reason, message string) {
		ref := model.ObjectRef{Group: fo.Group, Kind: fo.Kind, Namespace: fo.Namespace, Name: fo.Name}
		lo, ok := live[ref]
		if !ok {
			return // gone from the cluster, or only in the last-known-good revision
		}
		key := eventKey{kind: fo.Kind, uid: lo.uid}
		if seen[key] {
			return
		}
		seen[key] = true
		if c.reported[key] == reason+"\x00"+message {
			return
		}
		c.reported[key] = reason + "\x00" + message
		c.recorder.Event(&corev1.ObjectReference{
			APIVersion: lo.apiVersion, Kind: fo.Kind, Namespace: fo.Namespace, Name: fo.Name, UID: lo.uid,
		}, corev1.EventTypeWarning, reason, message)
	}
	describe := func(fo model.FallbackObject) string {
		return served.objects[model.ObjectRef{Group: fo.Group, Kind: fo.Kind, Namespace: fo.Namespace, Name: fo.Name}].Description
	}
	broken := map[model.ObjectRef]bool{}
	for _, fo := range served.fallback.BrokenObjects {
		broken[model.ObjectRef{Group: fo.Group, Kind: fo.Kind, Namespace: fo.Namespace, Name: fo.Name}] = true
	}
	for _, fo := range served.fallback.BackfilledObjects {
		emit(fo, EventFallbackBackfilled, fmt.Sprintf("revision %d serves its last-known-good version: %s", served.revision, describe(fo)))
	}
	for _, fo := range served.fallback.BrokenObjects {
		emit(fo, EventTranslationFailed, fmt.Sprintf("revision %d: %s", served.revision, describe(fo)))
	}
	for _, fo := range served.fallback.ExcludedObjects {
		if broken[model.ObjectRef{Group: fo.Group, Kind: fo.Kind, Namespace: fo.Namespace, Name: fo.Name}] {
			continue
		}
		emit(fo, EventFallbackExcluded, fmt.Sprintf("revision %d leaves it out with the broken objects it depends on (%s): %s",
			served.revision, strings.Join(fo.CausingObjects, ", "), describe(fo)))
	}
	for k := range c.reported {
		if !seen[k] {
			delete(c.reported, k)
		}
	}
}

// ingressServed reports whether the gateway serves routes of the Ingress.
func ingressServed(served *servedRevision, ns, name string) bool {
	st, ok := served.objects[model.ObjectRef{Group: "networking.k8s.io", Kind: "Ingress", Namespace: ns, Name: name}]
	return ok && st.InUse && (st.Status == model.StatusValid || st.Status == model.StatusBackfilled)
}

// ingressStatuses puts the publish address into status.loadBalancer of
// every Ingress the gateway serves and clears it from the Ingresses of
// revgate's class that it does not serve; another class's Ingress loses the
// address only when it is the only one listed (it was ours).
func (c *Controller) ingressStatuses(ctx context.Context, served *servedRevision, sel *Selection) error {
	addr, ok, err := c.publishAddress(ctx)
	if err != nil || !ok {
		return err
	}
	ours := map[types.NamespacedName]bool{}
	for _, ing := range sel.Ingresses {
		ours[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = true
	}
	mine := []networkingv1.IngressLoadBalancerIngress{addr}
	var errs []error
	for _, ing := range c.cacheView.Ingresses() {
		cur := ing.Status.LoadBalancer.Ingress
		var want []networkingv1.IngressLoadBalancerIngress
		switch key := (types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}); {
		case ours[key] && ingressServed(served, ing.Namespace, ing.Name):
			want = mine
		case ours[key]:
		case sameAddresses(cur, mine):
		default:
			continue
		}
		if sameAddresses(cur, want) {
			continue
		}
		upd := ing.DeepCopy()
		upd.Status.LoadBalancer.Ingress = want
		_, err := c.client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("update status of Ingress %s/%s: %w", ing.Namespace, ing.Name, err))
		}
	}
	return errors.Join(errs...)
}

func sameAddresses(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].IP != b[i].IP || a[i].Hostname != b[i].Hostname || len(a[i].Ports) != len(b[i].Ports) {
			return false
		}
	}
	return true
}

// publishAddress is --publish-address, or the node's address (InternalIP,
// else ExternalIP, else Hostname). ok is false, with a log line, when the
// node is not a Kubernetes node (an edge host attached to a cluster
// without a kubelet): Ingress statuses are then left alone.
func (c *Controller) publishAddress(ctx context.Context) (networkingv1.IngressLoadBalancerIngress, bool, error) {
	a := c.opts.PublishAddress
	if a == "" && c.nodeAddr == "" {
		node, err := c.client.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !c.noAddrLogged {
				c.noAddrLogged = true
				c.log.Warn("node not found and no --publish-address: Ingress statuses are not written", "node", c.opts.NodeName)
			}
			return networkingv1.IngressLoadBalancerIngress{}, false, nil
		}
		if err != nil {
			return networkingv1.IngressLoadBalancerIngress{}, false, fmt.Errorf("get node %s for its address: %w", c.opts.NodeName, err)
		}
		c.nodeAddr = nodeAddress(node)
		if c.nodeAddr == "" {
			if !c.noAddrLogged {
				c.noAddrLogged = true
				c.log.Warn("node has no address and no --publish-address: Ingress statuses are not written", "node", c.opts.NodeName)
			}
			return networkingv1.IngressLoadBalancerIngress{}, false, nil
		}
	}
	if a == "" {
		a = c.nodeAddr
	}
	if net.ParseIP(a) != nil {
		return networkingv1.IngressLoadBalancerIngress{IP: a}, true, nil
	}
	return networkingv1.IngressLoadBalancerIngress{Hostname: a}, true, nil
}

func nodeAddress(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// contourStatus maps a gateway status onto Contour's three: an object
// left out or served from its last-known-good version is invalid as it is.
func contourStatus(st model.ObjectStatus) (string, string) {
	switch st.Status {
	case model.StatusValid:
		return contourValid, st.Description
	case model.StatusOrphaned:
		return contourOrphaned, st.Description
	default:
		return contourInvalid, st.Description
	}
}

// ingressRouteStatuses writes status.currentStatus and status.description
// of every IngressRoute in the served revision, when they change.
func (c *Controller) ingressRouteStatuses(ctx context.Context, served *servedRevision) error {
	var errs []error
	for _, u := range c.cacheView.IngressRoutes() {
		st, ok := served.objects[model.ObjectRef{Group: config.IngressRouteGroup, Kind: "IngressRoute", Namespace: u.GetNamespace(), Name: u.GetName()}]
		if !ok {
			continue
		}
		want, desc := contourStatus(st)
		cur, _, _ := unstructured.NestedString(u.Object, "status", "currentStatus")
		curDesc, _, _ := unstructured.NestedString(u.Object, "status", "description")
		if cur == want && curDesc == desc {
			continue
		}
		upd := u.DeepCopy()
		if err := unstructured.SetNestedStringMap(upd.Object, map[string]string{"currentStatus": want, "description": desc}, "status"); err != nil {
			errs = append(errs, err)
			continue
		}
		_, err := c.dyn.Resource(IngressRouteResource).Namespace(u.GetNamespace()).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("update status of IngressRoute %s/%s: %w", u.GetNamespace(), u.GetName(), err))
		}
	}
	return errors.Join(errs...)
}
