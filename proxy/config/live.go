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

// liveList and liveSlice are the file's shapes: the fields of a List and of
// an EndpointSlice that the file keeps, in a fixed order.
type liveList struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Items      []liveSlice `json:"items"`
}

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
	data, err := json.MarshalIndent(liveList{APIVersion: endpointsListAPIVersion, Kind: endpointsListKind, Items: items}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode endpoints: %w", err)
	}
	return append(data, '\n'), nil
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
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &doc); err != nil {
		return nil, &EndpointsError{Message: "parse: " + jsonErrorText(data, err)}
	}
	if doc.APIVersion != endpointsListAPIVersion || doc.Kind != endpointsListKind {
		return nil, &EndpointsError{Message: fmt.Sprintf("want apiVersion %q and kind %q, got %q and %q", endpointsListAPIVersion, endpointsListKind, doc.APIVersion, doc.Kind)}
	}
	out := make([]discoveryv1.EndpointSlice, len(doc.Items))
	seen := make(map[model.ObjectRef]int, len(doc.Items))
	for i, raw := range doc.Items {
		item := fmt.Sprintf("items[%d]", i)
		var tm struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &tm); err != nil {
			return nil, &EndpointsError{Field: item, Message: "parse: " + err.Error()}
		}
		var ref model.ObjectRef
		if tm.Metadata.Name != "" {
			ref = model.ObjectRef{Group: groupDiscovery, Kind: kindEndpointSlice, Namespace: tm.Metadata.Namespace, Name: tm.Metadata.Name}
		}
		if tm.APIVersion != sliceAPIVersion || tm.Kind != kindEndpointSlice {
			return nil, &EndpointsError{Object: ref, Field: item, Message: fmt.Sprintf("want apiVersion %q and kind %q, got %q and %q", sliceAPIVersion, kindEndpointSlice, tm.APIVersion, tm.Kind)}
		}
		s := &out[i]
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, s); err != nil {
			return nil, &EndpointsError{Object: ref, Field: item, Message: "parse: " + err.Error()}
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
	return out, nil
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
