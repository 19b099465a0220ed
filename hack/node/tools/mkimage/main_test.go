package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTar returns the regular files of a tar stream by name.
func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
	}
}

// blobOf returns the blob a digest names and checks that it hashes to it.
func blobOf(t *testing.T, archive map[string][]byte, digest string) []byte {
	t.Helper()
	data, ok := archive["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("archive lacks blob %s", digest)
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		t.Fatalf("blob %s hashes to %s", digest, got)
	}
	return data
}

func TestArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	name := "docker.io/library/tool:e2e"
	if err := run(out, name, "/bin/tool", fileList{"/bin/tool": bin}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	archive := readTar(t, f)
	if string(archive["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", archive["oci-layout"])
	}

	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(archive["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(index.Manifests))
	}
	md := index.Manifests[0]
	if md.Annotations[annotationImageName] != name || md.Annotations[annotationRefName] != "e2e" {
		t.Errorf("manifest annotations %v", md.Annotations)
	}
	var manifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blobOf(t, archive, md.Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		OS     string `json:"os"`
		Config struct {
			Entrypoint []string `json:"Entrypoint"`
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blobOf(t, archive, manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/bin/tool" {
		t.Errorf("config %+v", cfg)
	}
	if len(manifest.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != manifest.Layers[0].Digest {
		t.Fatalf("layers %+v, diff ids %v: want one uncompressed layer", manifest.Layers, cfg.RootFS.DiffIDs)
	}
	layer := readTar(t, bytes.NewReader(blobOf(t, archive, manifest.Layers[0].Digest)))
	if string(layer["bin/tool"]) != "#!/bin/true\n" {
		t.Errorf("layer files %v", layer)
	}
}

func TestFileFlag(t *testing.T) {
	for _, tc := range []struct {
		arg string
		ok  bool
	}{
		{"/revgate=./revgate", true},
		{"revgate=./revgate", false},
		{"/revgate", false},
		{"/revgate=", false},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			err := fileList{}.Set(tc.arg)
			if (err == nil) != tc.ok {
				t.Errorf("Set(%q) = %v, want ok %v", tc.arg, err, tc.ok)
			}
		})
	}
}
