package config

import (
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/revgate/revgate/proxy/model"
)

// ClassFilter answers, outside a translation, the question the translation
// asks of every Ingress and IngressClass: is it for revgate? The cluster
// loop uses it to render only the objects the gateway serves, so that a
// change to another controller's Ingress cuts no revision; it applies the
// very rules of the translation (see the package documentation).
type ClassFilter struct {
	t  *translator
	ci classInfo
}

// NewClassFilter prepares the class rules of opts (only IngressClass is
// read) for the given IngressClasses. Problems found on the classes are
// the translation's business and are dropped here. A ClassFilter is not
// safe for concurrent use.
func NewClassFilter(opts Options, classes []*networkingv1.IngressClass) *ClassFilter {
	opts.setDefaults()
	t := &translator{opts: opts, out: &translation{
		broken:  map[model.ObjectRef]string{},
		ignored: map[model.ObjectRef]string{},
		deps:    map[model.ObjectRef][]dep{},
	}}
	objs := make([]*object, 0, len(classes))
	for _, ic := range classes {
		objs = append(objs, newObject(ic, groupNetworking, kindIngressClass, "", &ic.ObjectMeta))
	}
	return &ClassFilter{t: t, ci: t.ingressClasses(objs)}
}

// ClassServed reports whether an IngressClass is revgate's: its controller
// is revgate.io/ingress-controller or its name is the configured class.
func (f *ClassFilter) ClassServed(ic *networkingv1.IngressClass) bool {
	return f.t.classIsOurs(newObject(ic, groupNetworking, kindIngressClass, "", &ic.ObjectMeta))
}

// IngressServed reports whether an Ingress is for revgate, and when it is
// not, why (as /debug/config/status says it).
func (f *ClassFilter) IngressServed(ing *networkingv1.Ingress) (bool, string) {
	o := newObject(ing, groupNetworking, kindIngress, "", &ing.ObjectMeta)
	ours, _, why := f.t.ingressClassOf(o, ing, f.ci)
	// The rules may warn (annotation and field disagree); the translation
	// reports that, and the filter must not grow with every call.
	f.t.out.problems = f.t.out.problems[:0]
	return ours, why
}
