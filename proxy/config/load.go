package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/proxy/model"
)

// API groups and kinds of the objects revgate understands.
const (
	groupNetworking = "networking.k8s.io"
	groupDiscovery  = "discovery.k8s.io"

	kindIngress       = "Ingress"
	kindIngressClass  = "IngressClass"
	kindService       = "Service"
	kindEndpointSlice = "EndpointSlice"
	kindSecret        = "Secret"
	kindIngressRoute  = "IngressRoute"

	labelServiceName = "kubernetes.io/service-name"
)

// object is one loaded configuration object.
type object struct {
	ref  model.ObjectRef
	file string
	// obj is *networkingv1.Ingress, *networkingv1.IngressClass,
	// *corev1.Service, *discoveryv1.EndpointSlice, *corev1.Secret or
	// *IngressRoute; nil for objects of unknown kinds.
	obj  any
	meta *metav1.ObjectMeta
	// ignored is why the object is not for revgate ("" when it is).
	ignored string
	// lkg marks an object read from the last-known-good revision.
	lkg bool
}

// store holds the objects of one configuration, indexed.
type store struct {
	objects []*object
	byRef   map[model.ObjectRef]*object
	// slices are the EndpointSlices by "namespace/service".
	slices map[string][]*object
}

func newStore() *store {
	return &store{byRef: map[model.ObjectRef]*object{}, slices: map[string][]*object{}}
}

// add indexes o, reporting a duplicate as a warning and ignoring it.
func (s *store) add(o *object, problems *[]model.Problem) {
	if o.obj != nil {
		if prev, ok := s.byRef[o.ref]; ok {
			o.ignored = "duplicate of the object in " + prev.file
			*problems = append(*problems, model.Problem{File: o.file, Object: o.ref, Message: "duplicate object, already loaded from " + prev.file + "; ignored", Severity: model.SeverityWarning})
		} else {
			s.byRef[o.ref] = o
			if sl, ok := o.obj.(*discoveryv1.EndpointSlice); ok {
				if svc := sl.Labels[labelServiceName]; svc != "" {
					k := o.ref.Namespace + "/" + svc
					s.slices[k] = append(s.slices[k], o)
				}
			}
		}
	}
	s.objects = append(s.objects, o)
}

// fileSystem is the seam the loader reads through; tests swap functions to
// inject faults.
type fileSystem struct {
	readFile func(string) ([]byte, error)
	readDir  func(string) ([]fs.DirEntry, error)
	stat     func(string) (fs.FileInfo, error)
}

var osFS = fileSystem{readFile: os.ReadFile, readDir: os.ReadDir, stat: os.Stat}

// isRevisionDir reports whether dir holds configmaps/ or secrets/.
func (f fileSystem) isRevisionDir(dir string) bool {
	for _, sub := range []string{"configmaps", "secrets"} {
		if fi, err := f.stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// load reads every folder into one store. It fails only when a folder cannot
// be read at all; unreadable files and documents become problems.
func (f fileSystem) load(dirs []string, namespace string) (*store, []model.Problem, error) {
	st := newStore()
	var problems []model.Problem
	for _, dir := range dirs {
		fi, err := f.stat(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("read configuration folder: %w", err)
		}
		if !fi.IsDir() {
			return nil, nil, fmt.Errorf("read configuration folder %s: not a folder", dir)
		}
		if f.isRevisionDir(dir) {
			err = f.loadRevision(st, dir, namespace, &problems)
		} else {
			err = f.loadPlain(st, dir, namespace, &problems)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return st, problems, nil
}

// loadRevision reads configmaps/<name>/<key> and secrets/<name>/ of a
// revision folder; top-level files (pod manifests) are not configuration.
func (f fileSystem) loadRevision(st *store, dir, namespace string, problems *[]model.Problem) error {
	cms := filepath.Join(dir, "configmaps")
	names, err := f.subdirs(cms)
	if err != nil {
		return err
	}
	for _, name := range names {
		f.loadObjectFiles(st, filepath.Join(cms, name), "configmap", namespace, problems)
	}
	secs := filepath.Join(dir, "secrets")
	names, err = f.subdirs(secs)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == SecretObjectsFolder {
			f.loadObjectFiles(st, filepath.Join(secs, name), "secret", namespace, problems)
			continue
		}
		f.loadSecretDir(st, filepath.Join(secs, name), name, namespace, problems)
	}
	return nil
}

// SecretObjectsFolder is the folder under a revision's secrets/ whose files
// hold Kubernetes objects, as configmaps/<name>/ files do, rather than the
// keys of one TLS Secret. It carries Secrets of any namespace (a
// secrets/<name>/ folder is always in Options.Namespace) and keeps them 0600
// like every file under secrets/. Its name is not a valid Secret name, so
// no Secret's folder is taken for it.
const SecretObjectsFolder = "_objects"

// loadObjectFiles reads every file of dir (a configmaps/<name>/ or
// secrets/_objects/ folder) as YAML or JSON objects; what names the folder
// kind in a problem.
func (f fileSystem) loadObjectFiles(st *store, dir, what, namespace string, problems *[]model.Problem) {
	keys, err := f.readDir(dir)
	if err != nil {
		*problems = append(*problems, fileProblem(dir, fmt.Sprintf("read %s folder: %v", what, err)))
		return
	}
	for _, k := range keys {
		if strings.HasPrefix(k.Name(), ".") || k.IsDir() {
			continue
		}
		f.loadFile(st, filepath.Join(dir, k.Name()), namespace, problems)
	}
}

// subdirs lists the non-hidden sub-folders of dir, sorted; a missing dir has none.
func (f fileSystem) subdirs(dir string) ([]string, error) {
	entries, err := f.readDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// loadSecretDir turns secrets/<name>/ into a Secret without a type: a
// revision carries only the keys. Translation judges it as TLS when it holds
// tls.crt or tls.key (isTLSSecret).
func (f fileSystem) loadSecretDir(st *store, dir, name, namespace string, problems *[]model.Problem) {
	entries, err := f.readDir(dir)
	if err != nil {
		*problems = append(*problems, fileProblem(dir, fmt.Sprintf("read secret folder: %v", err)))
		return
	}
	sec := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kindSecret},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       map[string][]byte{},
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := f.readFile(filepath.Join(dir, e.Name()))
		if err != nil {
			*problems = append(*problems, fileProblem(filepath.Join(dir, e.Name()), fmt.Sprintf("read secret key: %v", err)))
			continue
		}
		sec.Data[e.Name()] = b
	}
	st.add(newObject(sec, "", kindSecret, dir, &sec.ObjectMeta), problems)
}

// loadPlain reads every *.yaml, *.yml and *.json file of dir in lexical
// order, skipping dotfiles. Sub-folders are not read: a sub-folder is a
// separate configuration (examples-broken is an overlay of examples), named
// with another --config-dir when wanted.
func (f fileSystem) loadPlain(st *store, dir, namespace string, problems *[]model.Problem) error {
	entries, err := f.readDir(dir)
	if err != nil {
		return fmt.Errorf("read configuration folder: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		if e.IsDir() {
			continue
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
			f.loadFile(st, p, namespace, problems)
		}
	}
	return nil
}

func (f fileSystem) loadFile(st *store, path, namespace string, problems *[]model.Problem) {
	data, err := f.readFile(path)
	if err != nil {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("read file: %v", err)))
		return
	}
	decodeFile(st, path, data, namespace, problems)
}

func fileProblem(file, msg string) model.Problem {
	return model.Problem{File: file, Message: msg, Severity: model.SeverityError}
}

// maxDocument bounds one YAML document (the API server's own limit is 3 MiB).
const maxDocument = 8 << 20

// decodeFile decodes every document of one file into st. Documents are
// numbered from 0 in messages.
func decodeFile(st *store, path string, data []byte, namespace string, problems *[]model.Problem) {
	r := utilyaml.NewYAMLReader(bufio.NewReaderSize(bytes.NewReader(data), 4096))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			*problems = append(*problems, fileProblem(path, fmt.Sprintf("document %d: read: %v", i, err)))
			return
		}
		if len(doc) > maxDocument {
			*problems = append(*problems, fileProblem(path, fmt.Sprintf("document %d: larger than %d bytes", i, maxDocument)))
			continue
		}
		decodeDocument(st, path, i, doc, namespace, problems)
	}
}

// decodeDocument decodes one YAML or JSON document (an object or a v1 List).
func decodeDocument(st *store, path string, index int, doc []byte, namespace string, problems *[]model.Problem) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("document %d: parse: %v", index, err)))
		return
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return
	}
	if js[0] != '{' {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("document %d: not an object", index)))
		return
	}
	var tm struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Items []rawJSON `json:"items"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("document %d: parse: %v", index, err)))
		return
	}
	if tm.APIVersion == "v1" && tm.Kind == "List" {
		for j, item := range tm.Items {
			decodeObject(st, path, fmt.Sprintf("document %d item %d", index, j), item, namespace, problems)
		}
		return
	}
	decodeObject(st, path, fmt.Sprintf("document %d", index), js, namespace, problems)
}

// rawJSON keeps a List item undecoded.
type rawJSON []byte

// UnmarshalJSON keeps a copy of the item.
func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// decodeObject decodes one object of a known kind, strictly: unknown fields
// are warnings naming the field.
func decodeObject(st *store, path, where string, js []byte, namespace string, problems *[]model.Problem) {
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("%s: parse: %v", where, err)))
		return
	}
	var (
		target     any
		meta       *metav1.ObjectMeta
		group      string
		namespaced = true
	)
	switch gvk := tm.APIVersion + "/" + tm.Kind; gvk {
	case "networking.k8s.io/v1/Ingress":
		o := &networkingv1.Ingress{}
		target, meta, group = o, &o.ObjectMeta, groupNetworking
	case "networking.k8s.io/v1/IngressClass":
		o := &networkingv1.IngressClass{}
		target, meta, group, namespaced = o, &o.ObjectMeta, groupNetworking, false
	case "v1/Service":
		o := &corev1.Service{}
		target, meta = o, &o.ObjectMeta
	case "discovery.k8s.io/v1/EndpointSlice":
		o := &discoveryv1.EndpointSlice{}
		target, meta, group = o, &o.ObjectMeta, groupDiscovery
	case "v1/Secret":
		o := &corev1.Secret{}
		target, meta = o, &o.ObjectMeta
	case "contour.heptio.com/v1beta1/IngressRoute":
		o := &IngressRoute{}
		target, meta, group = o, &o.ObjectMeta, IngressRouteGroup
	default:
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		// Best effort: the name only labels the warning.
		_ = kjson.UnmarshalCaseSensitivePreserveInts(js, &m)
		if tm.Kind == "" {
			*problems = append(*problems, fileProblem(path, where+": no kind"))
			return
		}
		g, _, _ := strings.Cut(tm.APIVersion, "/")
		if !strings.Contains(tm.APIVersion, "/") {
			g = ""
		}
		ref := model.ObjectRef{Group: g, Kind: tm.Kind, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}
		*problems = append(*problems, model.Problem{File: path, Object: ref, Message: fmt.Sprintf("unsupported kind %s %s; ignored", tm.APIVersion, tm.Kind), Severity: model.SeverityWarning})
		st.add(&object{ref: ref, file: path, ignored: "unsupported kind " + tm.APIVersion + " " + tm.Kind}, problems)
		return
	}
	strict, err := kjson.UnmarshalStrict(js, target, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err != nil {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("%s: %s %s: %v", where, tm.APIVersion, tm.Kind, err)))
		return
	}
	if meta.Name == "" {
		*problems = append(*problems, fileProblem(path, fmt.Sprintf("%s: %s without metadata.name", where, tm.Kind)))
		return
	}
	if namespaced && meta.Namespace == "" {
		meta.Namespace = namespace
	}
	if !namespaced {
		meta.Namespace = ""
	}
	o := newObject(target, group, tm.Kind, path, meta)
	for _, se := range strict {
		*problems = append(*problems, model.Problem{File: path, Object: o.ref, Field: strictField(se), Message: strictMessage(se), Severity: model.SeverityWarning})
	}
	st.add(o, problems)
}

// strictField extracts the field path of a strict decoding error
// (`unknown field "spec.foo"`).
func strictField(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '"'); i >= 0 {
		if j := strings.LastIndexByte(s, '"'); j > i {
			return s[i+1 : j]
		}
	}
	return ""
}

func strictMessage(err error) string {
	s := err.Error()
	switch {
	case strings.HasPrefix(s, "unknown field"):
		return "unknown field; ignored"
	case strings.HasPrefix(s, "duplicate field"):
		return "duplicate field; the last value is used"
	}
	return s
}

func newObject(obj any, group, kind, file string, meta *metav1.ObjectMeta) *object {
	return &object{
		ref:  model.ObjectRef{Group: group, Kind: kind, Namespace: meta.Namespace, Name: meta.Name},
		file: file,
		obj:  obj,
		meta: meta,
	}
}
