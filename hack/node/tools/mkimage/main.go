// Command mkimage writes a single-layer OCI image archive holding the given
// files, ready for `ctr images import`. The test node cannot pull images, so
// its images are built from local binaries with this tool.
//
//	mkimage -o revgate.tar -name docker.io/library/revgate:e2e \
//	    -file /revgate=./bin/revgate -entrypoint /revgate
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"

	// annotationImageName is the name containerd's importer gives the image.
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// fileList collects repeated -file IMAGE_PATH=HOST_PATH flags.
type fileList map[string]string

func (f fileList) String() string { return fmt.Sprint(map[string]string(f)) }

func (f fileList) Set(v string) error {
	dst, src, ok := strings.Cut(v, "=")
	if !ok || !path.IsAbs(dst) || src == "" {
		return fmt.Errorf("want /path/in/image=host/path, got %q", v)
	}
	f[path.Clean(dst)] = src
	return nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

func (b blob) descriptor(mediaType string) descriptor {
	return descriptor{MediaType: mediaType, Digest: b.digest, Size: int64(len(b.data))}
}

func main() {
	files := fileList{}
	out := flag.String("o", "", "output archive (required)")
	name := flag.String("name", "", "full image name, e.g. docker.io/library/revgate:e2e (required)")
	entrypoint := flag.String("entrypoint", "", "entrypoint of the image (a path in the image)")
	flag.Var(files, "file", "IMAGE_PATH=HOST_PATH, repeatable: a file to put in the image (mode kept)")
	flag.Parse()
	if err := run(*out, *name, *entrypoint, files); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(out, name, entrypoint string, files fileList) error {
	if out == "" || name == "" || len(files) == 0 {
		return errors.New("-o, -name and at least one -file are required")
	}
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	layerBlob := newBlob(layer)
	plat := platform{Architecture: runtime.GOARCH, OS: "linux"}
	cfg := map[string]any{
		"architecture": plat.Architecture,
		"os":           plat.OS,
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Env":        []string{"PATH=/usr/local/bin:/usr/bin:/bin:/"},
			"Entrypoint": nonEmpty(entrypoint),
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerBlob.digest}},
	}
	cfgBlob, err := jsonBlob(cfg)
	if err != nil {
		return err
	}
	manifestBlob, err := jsonBlob(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        cfgBlob.descriptor(mediaConfig),
		"layers":        []descriptor{layerBlob.descriptor(mediaLayer)},
	})
	if err != nil {
		return err
	}
	md := manifestBlob.descriptor(mediaManifest)
	md.Platform = &plat
	tag := name[strings.LastIndex(name, ":")+1:]
	md.Annotations = map[string]string{annotationImageName: name, annotationRefName: tag}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaIndex,
		"manifests":     []descriptor{md},
	})
	if err != nil {
		return err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, b := range []blob{layerBlob, cfgBlob, manifestBlob} {
		entries = append(entries, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(b.digest, "sha256:"), b.data})
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/", Mode: 0o755}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "blobs/sha256/", Mode: 0o755}); err != nil {
		return err
	}
	for _, e := range entries {
		if err := writeFile(tw, e.name, e.data, 0o644); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return os.Rename(tmp, out)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func jsonBlob(v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	return newBlob(data), nil
}

// layerTar builds the uncompressed layer: the parent folders of every file,
// a world-writable /tmp, and the files themselves.
func layerTar(files fileList) ([]byte, error) {
	dirs := map[string]bool{"tmp": true}
	names := make([]string, 0, len(files))
	for dst := range files {
		names = append(names, dst)
		for d := path.Dir(dst); d != "/"; d = path.Dir(d) {
			dirs[strings.TrimPrefix(d, "/")] = true
		}
	}
	sort.Strings(names)
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirNames {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode}); err != nil {
			return nil, err
		}
	}
	for _, dst := range names {
		src := files[dst]
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("file for %s: %w", dst, err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("file for %s: %w", dst, err)
		}
		if err := writeFile(tw, strings.TrimPrefix(dst, "/"), data, int64(st.Mode().Perm())); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar %s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return fmt.Errorf("tar %s: %w", name, err)
	}
	return nil
}
