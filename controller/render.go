package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/revisions"
)

// The rendered revision source holds one ConfigMap per kind, each key one
// object: configmaps/<kind>/<namespace>.<name>.yaml (<name>.yaml for
// cluster-scoped objects; a namespace holds no dot, so the first dot
// separates). Secrets go to secrets/_objects/ with the same file names, 0600.
const (
	folderIngressClasses = "ingressclasses"
	folderIngresses      = "ingresses"
	folderIngressRoutes  = "ingressroutes"
	folderServices       = "services"
	// FolderEndpointSlices holds the EndpointSlices a revision was cut with;
	// it is left out of the snapshot digest, so endpoint churn alone never
	// makes a snapshot differ from the installed one.
	FolderEndpointSlices = "endpointslices"
)

// annotationLastApplied is kubectl's copy of the whole object, churn that
// would double every file (and, on a Secret, hold its data in the clear).
const annotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Objects is what the gateway serves, selected from the cluster.
type Objects struct {
	IngressClasses []*networkingv1.IngressClass
	Ingresses      []*networkingv1.Ingress
	IngressRoutes  []*unstructured.Unstructured
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Secrets        []*corev1.Secret
}

// Snapshot is a rendered revision source.
type Snapshot struct {
	// Config is what the installer writes.
	Config *installer.Config
	// Digest identifies the routing structure: a SHA-256 over every file but
	// the EndpointSlices, hex.
	Digest string
	// Slices are the rendered EndpointSlices, sorted by namespace/name: the
	// live endpoints.
	Slices []discoveryv1.EndpointSlice
	// RenderTime is how long selecting and rendering took (logged).
	RenderTime time.Duration
}

// renderer renders Objects, keeping each object's bytes until its
// resourceVersion changes: with thousands of objects a burst of changes
// re-renders only the objects that changed.
type renderer struct {
	cache map[string]renderedObject
}

type renderedObject struct {
	resourceVersion string
	data            []byte
	// slice is the cleaned EndpointSlice (EndpointSlices only).
	slice *discoveryv1.EndpointSlice
}

// objectFile is the file name of an object in its kind's folder.
func objectFile(namespace, name string) string {
	if namespace == "" {
		return name + ".yaml"
	}
	return namespace + "." + name + ".yaml"
}

// render renders objs into a snapshot; objects of one kind that share a
// namespace and name (which the API server does not allow) keep the first.
func (r *renderer) render(objs *Objects) (*Snapshot, error) {
	next := make(map[string]renderedObject, len(r.cache))
	cfg := &installer.Config{}
	snap := &Snapshot{Config: cfg}
	var errs []error
	add := func(folder string, secret bool, m metav1.Object, clean func() any) *renderedObject {
		file := objectFile(m.GetNamespace(), m.GetName())
		key := folder + "/" + file
		if secret {
			key = installer.SecretsDir + "/" + key
		}
		if _, dup := next[key]; dup {
			return nil
		}
		ro, ok := r.cache[key]
		if !ok || ro.resourceVersion == "" || ro.resourceVersion != m.GetResourceVersion() {
			obj := clean()
			data, err := marshal(obj)
			if err != nil {
				errs = append(errs, fmt.Errorf("render %s: %w", key, err))
				return nil
			}
			ro = renderedObject{resourceVersion: m.GetResourceVersion(), data: data}
			if sl, ok := obj.(*discoveryv1.EndpointSlice); ok {
				ro.slice = sl
			}
		}
		next[key] = ro
		var err error
		if secret {
			err = cfg.AddSecretKey(folder, file, ro.data)
		} else {
			err = cfg.AddConfigMapKey(folder, file, ro.data)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return &ro
	}
	for _, o := range objs.IngressClasses {
		add(folderIngressClasses, false, o, func() any { return cleanIngressClass(o) })
	}
	for _, o := range objs.Ingresses {
		add(folderIngresses, false, o, func() any { return cleanIngress(o) })
	}
	for _, o := range objs.IngressRoutes {
		add(folderIngressRoutes, false, o, func() any { return cleanIngressRoute(o) })
	}
	for _, o := range objs.Services {
		add(folderServices, false, o, func() any { return cleanService(o) })
	}
	for _, o := range objs.Secrets {
		add(config.SecretObjectsFolder, true, o, func() any { return cleanSecret(o) })
	}
	for _, o := range objs.EndpointSlices {
		if ro := add(FolderEndpointSlices, false, o, func() any { return cleanEndpointSlice(o) }); ro != nil {
			snap.Slices = append(snap.Slices, *ro.slice)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(snap.Slices, func(i, j int) bool {
		a, b := snap.Slices[i], snap.Slices[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	r.cache = next
	snap.Digest = digest(configFiles(cfg))
	return snap, nil
}

// marshal renders a cleaned object as YAML, without the status (a typed
// object would show its empty status struct).
func marshal(obj any) ([]byte, error) {
	m, ok := obj.(map[string]any)
	if !ok {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok && meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
	return yaml.Marshal(m)
}

// cleanMeta keeps what the gateway reads: name, namespace, labels,
// annotations (but kubectl's last-applied copy) and the creation time (the
// oldest Ingress wins a conflict). uid, resourceVersion, generation,
// managedFields, owners and finalizers are churn.
func cleanMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		Labels:            m.Labels,
		CreationTimestamp: m.CreationTimestamp,
	}
	for k, v := range m.Annotations {
		if k == annotationLastApplied {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

func cleanIngressClass(o *networkingv1.IngressClass) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: cleanMeta(o.ObjectMeta),
		Spec:       o.Spec,
	}
}

func cleanIngress(o *networkingv1.Ingress) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: cleanMeta(o.ObjectMeta),
		Spec:       o.Spec,
	}
}

func cleanService(o *corev1.Service) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: cleanMeta(o.ObjectMeta),
		Spec:       o.Spec,
	}
}

// cleanSecret keeps name, namespace, labels, type and data: a Secret's
// annotations may hold its data again (kubectl's last-applied copy).
func cleanSecret(o *corev1.Secret) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels},
		Type:       o.Type,
		Data:       o.Data,
	}
}

// cleanEndpointSlice keeps name, namespace and labels (the Service link),
// the ports and the endpoints sorted by address; an endpoint's target keeps
// its kind, namespace and name, not its uid and resourceVersion, which
// change with every pod update.
func cleanEndpointSlice(o *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels},
		AddressType: o.AddressType,
		Ports:       o.Ports,
	}
	for _, ep := range o.Endpoints {
		ep := *ep.DeepCopy()
		if ep.TargetRef != nil {
			ep.TargetRef = &corev1.ObjectReference{Kind: ep.TargetRef.Kind, Namespace: ep.TargetRef.Namespace, Name: ep.TargetRef.Name}
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	sort.SliceStable(out.Endpoints, func(i, j int) bool {
		return strings.Join(out.Endpoints[i].Addresses, ",") < strings.Join(out.Endpoints[j].Addresses, ",")
	})
	return out
}

// cleanIngressRoute keeps apiVersion, kind, the cleaned metadata and the
// spec. The status is the controller's own output: were it rendered, every
// status write would cut a revision.
func cleanIngressRoute(o *unstructured.Unstructured) map[string]any {
	m := o.DeepCopy()
	meta := cleanMeta(metav1.ObjectMeta{
		Name:              m.GetName(),
		Namespace:         m.GetNamespace(),
		Labels:            m.GetLabels(),
		Annotations:       m.GetAnnotations(),
		CreationTimestamp: m.GetCreationTimestamp(),
	})
	out := map[string]any{
		"apiVersion": m.GetAPIVersion(),
		"kind":       m.GetKind(),
		"metadata":   meta,
	}
	if spec, ok := m.Object["spec"]; ok {
		out["spec"] = spec
	}
	return out
}

// file is one file of a revision source, by its slash-separated path in the
// revision folder.
type file struct {
	rel  string
	data []byte
}

// configFiles lists the files of a rendered source, sorted by path.
func configFiles(cfg *installer.Config) []file {
	var out []file
	add := func(dir string, objs map[string]map[string][]byte) {
		for name, keys := range objs {
			for key, data := range keys {
				out = append(out, file{rel: path.Join(dir, name, key), data: data})
			}
		}
	}
	add(installer.ConfigMapsDir, cfg.ConfigMaps)
	add(installer.SecretsDir, cfg.Secrets)
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out
}

// revisionFiles lists the configuration files of an installed revision
// folder (configmaps/<name>/<key> and secrets/<name>/<key>), sorted by path.
func revisionFiles(f revisions.FS, dir string) ([]file, error) {
	var out []file
	for _, top := range []string{installer.ConfigMapsDir, installer.SecretsDir} {
		root := filepath.Join(dir, top)
		names, err := f.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", root, err)
		}
		for _, n := range names {
			if !n.IsDir() {
				continue
			}
			keys, err := f.ReadDir(filepath.Join(root, n.Name()))
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", filepath.Join(root, n.Name()), err)
			}
			for _, k := range keys {
				if k.IsDir() {
					continue
				}
				p := filepath.Join(root, n.Name(), k.Name())
				data, err := f.ReadFile(p)
				if err != nil {
					return nil, fmt.Errorf("read %s: %w", p, err)
				}
				out = append(out, file{rel: path.Join(top, n.Name(), k.Name()), data: data})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

// digest hashes the files of the routing structure: every file but the
// EndpointSlices, each as its path, its length and its bytes.
func digest(files []file) string {
	h := sha256.New()
	skip := installer.ConfigMapsDir + "/" + FolderEndpointSlices + "/"
	var n [8]byte
	for _, f := range files {
		if strings.HasPrefix(f.rel, skip) {
			continue
		}
		h.Write([]byte(f.rel))
		h.Write([]byte{0})
		l := len(f.data)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
