package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// Identity of the endpoints file and of its items.
const (
	endpointsListAPIVersion = "v1"
	endpointsListKind       = "List"
	sliceAPIVersion         = "discovery.k8s.io/v1"
)

// EndpointsError says what is wrong with an endpoints file and where.
type EndpointsError struct {
	// File is the file's path ("" when bytes were decoded).
	File string
	// Object is the EndpointSlice at fault (zero when the document as a
	// whole is).
	Object model.ObjectRef
	// Field is a JSON path from the top of the document, e.g.
	// "items[3].endpoints[0].addresses[1]"; "" for the document as a whole.
	Field string
	// Message says what is wrong.
	Message string
}

// Error renders "file: EndpointSlice/ns/name: field: message".
func (e *EndpointsError) Error() string {
	return model.Problem{File: e.File, Object: e.Object, Field: e.Field, Message: e.Message}.String()
}

// liveSlice is an item of the file: the fields of an EndpointSlice that the
// file keeps, in a fixed order.
type liveSlice struct {
	APIVersion  string                     `json:"apiVersion"`
	Kind        string                     `json:"kind"`
	Metadata    liveMeta                   `json:"metadata"`
	AddressType discoveryv1.AddressType    `json:"addressType"`
	Endpoints   []discoveryv1.Endpoint     `json:"endpoints"`
	Ports       []discoveryv1.EndpointPort `json:"ports,omitempty"`
}

type liveMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// EncodeEndpoints renders EndpointSlices as an endpoints file: sorted by
// namespace then name, metadata cleaned to name, namespace and labels (no
// resourceVersion, uid, generation, managedFields, creationTimestamp,
// ownerReferences or annotations), no endpoints written as an empty list.
// Equal slices give equal bytes whatever their order and bookkeeping. It
// does not check the slices: DecodeEndpoints does.
func EncodeEndpoints(slices []discoveryv1.EndpointSlice) ([]byte, error) {
	items := make([]liveSlice, 0, len(slices))
	for i := range slices {
		s := &slices[i]
		it := liveSlice{
			APIVersion:  sliceAPIVersion,
			Kind:        kindEndpointSlice,
			Metadata:    liveMeta{Name: s.Name, Namespace: s.Namespace, Labels: s.Labels},
			AddressType: s.AddressType,
			Endpoints:   s.Endpoints,
			Ports:       s.Ports,
		}
		if len(it.Metadata.Labels) == 0 {
			it.Metadata.Labels = nil
		}
		if it.Endpoints == nil {
			it.Endpoints = []discoveryv1.Endpoint{}
		}
		items = append(items, it)
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].Metadata, items[j].Metadata
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	// One item per line: compact to read back, and a diff of two files
	// names the slices that changed.
	var buf bytes.Buffer
	buf.WriteString(`{"apiVersion":"` + endpointsListAPIVersion + `","kind":"` + endpointsListKind + `","items":[`)
	for i := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
		data, err := json.Marshal(&items[i])
		if err != nil {
			return nil, fmt.Errorf("encode endpoints: %s/%s: %w", items[i].Metadata.Namespace, items[i].Metadata.Name, err)
		}
		buf.Write(data)
	}
	buf.WriteString("\n]}\n")
	return buf.Bytes(), nil
}

// DecodeEndpoints parses an endpoints file. Unknown fields are ignored (a
// newer writer may know more); everything else that is wrong fails the whole
// file with an *EndpointsError naming the item, object and field: a
// document that is not a v1 List, an item that is not a
// discovery.k8s.io/v1 EndpointSlice or has no name or namespace, two items
// with the same namespace and name, and what the revision loader refuses in
// an EndpointSlice (address type, port range, addresses). A file is applied
// whole or not at all.
func DecodeEndpoints(data []byte) ([]discoveryv1.EndpointSlice, error) {
	var doc struct {
		APIVersion string                      `json:"apiVersion"`
		Kind       string                      `json:"kind"`
		Items      []discoveryv1.EndpointSlice `json:"items"`
	}
	// One pass over the file; only a file that fails is read again, item
	// by item, to say where.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &doc); err != nil {
		return nil, locateDecodeError(data, err)
	}
	if err := checkListType(doc.APIVersion, doc.Kind); err != nil {
		return nil, err
	}
	seen := make(map[model.ObjectRef]int, len(doc.Items))
	for i := range doc.Items {
		s := &doc.Items[i]
		item := fmt.Sprintf("items[%d]", i)
		ref := sliceRef(s.Namespace, s.Name)
		if err := checkItemType(item, ref, s.APIVersion, s.Kind); err != nil {
			return nil, err
		}
		switch {
		case s.Name == "":
			return nil, &EndpointsError{Object: ref, Field: item + ".metadata.name", Message: "required"}
		case s.Namespace == "":
			return nil, &EndpointsError{Object: ref, Field: item + ".metadata.namespace", Message: "required"}
		}
		if j, dup := seen[ref]; dup {
			return nil, &EndpointsError{Object: ref, Field: item, Message: fmt.Sprintf("same namespace and name as items[%d]", j)}
		}
		seen[ref] = i
		if fes := checkEndpointSlice(s); len(fes) > 0 {
			return nil, &EndpointsError{Object: ref, Field: item + "." + fes[0].field, Message: fes[0].message}
		}
	}
	if doc.Items == nil {
		doc.Items = []discoveryv1.EndpointSlice{}
	}
	return doc.Items, nil
}

// sliceRef names an EndpointSlice in errors (zero without a name).
func sliceRef(namespace, name string) model.ObjectRef {
	if name == "" {
		return model.ObjectRef{}
	}
	return model.ObjectRef{Group: groupDiscovery, Kind: kindEndpointSlice, Namespace: namespace, Name: name}
}

func checkListType(apiVersion, kind string) error {
	if apiVersion != endpointsListAPIVersion || kind != endpointsListKind {
		return &EndpointsError{Message: fmt.Sprintf("want apiVersion %q and kind %q, got %q and %q", endpointsListAPIVersion, endpointsListKind, apiVersion, kind)}
	}
	return nil
}

func checkItemType(item string, ref model.ObjectRef, apiVersion, kind string) error {
	if apiVersion != sliceAPIVersion || kind != kindEndpointSlice {
		return &EndpointsError{Object: ref, Field: item, Message: fmt.Sprintf("want apiVersion %q and kind %q, got %q and %q", sliceAPIVersion, kindEndpointSlice, apiVersion, kind)}
	}
	return nil
}

// locateDecodeError reads a file that failed to decode item by item and
// names where it fails: the document, or the first item that does not
// decode.
func locateDecodeError(data []byte, err error) error {
	var doc struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if derr := kjson.UnmarshalCaseSensitivePreserveInts(data, &doc); derr != nil {
		return &EndpointsError{Message: "parse: " + jsonErrorText(data, derr)}
	}
	if lerr := checkListType(doc.APIVersion, doc.Kind); lerr != nil {
		return lerr
	}
	for i, raw := range doc.Items {
		item := fmt.Sprintf("items[%d]", i)
		var tm struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		// Best effort: the type and name only label the error.
		_ = kjson.UnmarshalCaseSensitivePreserveInts(raw, &tm)
		ref := sliceRef(tm.Metadata.Namespace, tm.Metadata.Name)
		if terr := checkItemType(item, ref, tm.APIVersion, tm.Kind); terr != nil {
			return terr
		}
		var s discoveryv1.EndpointSlice
		if ierr := kjson.UnmarshalCaseSensitivePreserveInts(raw, &s); ierr != nil {
			return &EndpointsError{Object: ref, Field: item, Message: "parse: " + ierr.Error()}
		}
	}
	return &EndpointsError{Message: "parse: " + err.Error()}
}

// jsonErrorText adds the line and column to a JSON syntax error, found
// again with encoding/json (whose errors carry the offset).
func jsonErrorText(data []byte, err error) string {
	var se *json.SyntaxError
	var probe json.RawMessage
	if !errors.As(json.Unmarshal(data, &probe), &se) || se.Offset <= 0 || se.Offset > int64(len(data)) {
		return err.Error()
	}
	before := data[:se.Offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(se.Offset) - bytes.LastIndexByte(before, '\n') - 1
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

// maxEndpointsFile bounds the endpoints file read into memory: far above
// what 10,000 Services with many endpoints each take.
const maxEndpointsFile = 256 << 20

// ReadEndpointsFile reads and decodes an endpoints file. A missing file
// returns an error matching fs.ErrNotExist (no live source); a decoding
// error is an *EndpointsError with File set.
func ReadEndpointsFile(path string) ([]discoveryv1.EndpointSlice, error) {
	data, err := osFS.readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read endpoints file: %w", err)
	}
	return DecodeEndpointsFile(path, data)
}

// DecodeEndpointsFile is DecodeEndpoints for the contents of the file path:
// an *EndpointsError names the file.
func DecodeEndpointsFile(path string, data []byte) ([]discoveryv1.EndpointSlice, error) {
	if len(data) > maxEndpointsFile {
		return nil, &EndpointsError{File: path, Message: fmt.Sprintf("larger than %d bytes", maxEndpointsFile)}
	}
	slices, err := DecodeEndpoints(data)
	var ee *EndpointsError
	if errors.As(err, &ee) {
		ee.File = path
	}
	return slices, err
}

// WriteEndpointsFile writes slices to path as EncodeEndpoints renders them,
// durably and atomically (a dotfile temp in the same folder, fsync, rename,
// fsync of the folder), creating the folder (0755) when missing. When the
// file already holds the same bytes nothing is written, so that an unchanged
// cluster wakes no watcher.
func WriteEndpointsFile(path string, slices []discoveryv1.EndpointSlice) error {
	data, err := EncodeEndpoints(slices)
	if err != nil {
		return err
	}
	return writeEndpointsFile(revisions.OS(), path, data)
}

func writeEndpointsFile(f revisions.FS, path string, data []byte) error {
	if old, err := f.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read endpoints file: %w", err)
	}
	if err := f.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create endpoints folder: %w", err)
	}
	if err := f.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write endpoints file: %w", err)
	}
	return nil
}

// LiveEndpoints resolves the endpoints of backends from live EndpointSlices:
// for every backend whose Service has at least one slice among them, the
// sorted addresses by the revision loader's rules (an empty list for a
// Service whose slices have no ready endpoint). Backends missing from the
// result keep the endpoints of their revision. Slices without a
// kubernetes.io/service-name label belong to no Service and are ignored.
func LiveEndpoints(backends map[string]*model.Backend, slices []discoveryv1.EndpointSlice) map[string][]string {
	bySvc := make(map[string][]*discoveryv1.EndpointSlice, len(slices))
	for i := range slices {
		s := &slices[i]
		if svc := s.Labels[labelServiceName]; svc != "" {
			k := s.Namespace + "/" + svc
			bySvc[k] = append(bySvc[k], s)
		}
	}
	out := make(map[string][]string)
	for key, b := range backends {
		if b.ExternalName {
			continue
		}
		if ss := bySvc[b.Service.Namespace+"/"+b.Service.Name]; len(ss) > 0 {
			out[key] = sliceEndpoints(b.Port, ss)
		}
	}
	return out
}
