package supervise

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ErrInvalidManifest marks a manifest file that cannot be run: it does not
// parse as a v1 Pod, or the Pod lacks what a host process needs.
var ErrInvalidManifest = errors.New("invalid pod manifest")

// manifest is one pod manifest file as read from the manifests dir.
type manifest struct {
	// name is the file name; it identifies the pod.
	name string
	// pod is the parsed pod; nil when err is set.
	pod *corev1.Pod
	// fingerprint identifies the parsed pod (metadata and spec, or with a
	// metadata.uid the uid and spec): two files with the same fingerprint
	// run the same processes.
	fingerprint string
	// rawHash identifies the file content, to log a bad file once per content.
	rawHash string
	// err is set when the file cannot be read, parsed or run.
	err error
}

// isManifestName reports whether a file in the manifests dir is a candidate
// pod manifest: dotfiles (temp files) and other extensions are skipped.
func isManifestName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readManifests reads every candidate manifest in dir. A missing dir is an
// empty set. Files that fail to read or parse are returned with err set so
// the caller can tell "invalid" from "absent".
func readManifests(dir string) (map[string]manifest, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]manifest{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifests dir %s: %w", dir, err)
	}
	out := make(map[string]manifest, len(entries))
	for _, e := range entries {
		name := e.Name()
		if !isManifestName(name) {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path) // follows symlinks, like the kubelet
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while listing
			}
			out[name] = manifest{name: name, err: fmt.Errorf("stat %s: %w", path, err)}
			continue
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			out[name] = manifest{name: name, err: fmt.Errorf("read %s: %w", path, err)}
			continue
		}
		out[name] = parseManifest(name, data)
	}
	return out, nil
}

// parseManifest parses and validates one manifest file's content.
func parseManifest(name string, data []byte) manifest {
	sum := sha256.Sum256(data)
	m := manifest{name: name, rawHash: hex.EncodeToString(sum[:])}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(data, pod); err != nil {
		m.err = fmt.Errorf("%w: %s: %w", ErrInvalidManifest, name, err)
		return m
	}
	if err := validatePod(pod); err != nil {
		m.err = fmt.Errorf("%w: %s: %w", ErrInvalidManifest, name, err)
		return m
	}
	// As the kubelet does: a manifest without metadata.uid is identified by
	// all of it, so any change starts a new pod; with a uid, a change of
	// labels or annotations alone updates the pod that runs.
	var meta any = pod.ObjectMeta
	if pod.UID != "" {
		meta = pod.UID
	}
	canon, err := json.Marshal(struct {
		Meta any `json:"metadata"`
		Spec any `json:"spec"`
	}{meta, pod.Spec})
	if err != nil {
		m.err = fmt.Errorf("%w: %s: %w", ErrInvalidManifest, name, err)
		return m
	}
	fp := sha256.Sum256(canon)
	m.pod = pod
	m.fingerprint = hex.EncodeToString(fp[:8])
	return m
}

// validatePod checks what a host process needs: a Pod kind, at least one
// container, unique container names and an explicit command (images are not
// pulled, so there is no image entrypoint to fall back on).
func validatePod(pod *corev1.Pod) error {
	if pod.Kind != "" && pod.Kind != "Pod" {
		return fmt.Errorf("kind %q is not Pod", pod.Kind)
	}
	if pod.APIVersion != "" && pod.APIVersion != "v1" {
		return fmt.Errorf("apiVersion %q is not v1", pod.APIVersion)
	}
	if len(pod.Spec.Containers) == 0 {
		return errors.New("no containers")
	}
	seen := map[string]bool{}
	for i, c := range pod.Spec.Containers {
		if c.Name == "" {
			return fmt.Errorf("container %d has no name", i)
		}
		if seen[c.Name] {
			return fmt.Errorf("duplicate container name %q", c.Name)
		}
		seen[c.Name] = true
		if len(c.Command) == 0 || c.Command[0] == "" {
			return fmt.Errorf("container %q has no command", c.Name)
		}
	}
	switch pod.Spec.RestartPolicy {
	case "", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		return fmt.Errorf("unknown restartPolicy %q", pod.Spec.RestartPolicy)
	}
	return nil
}
