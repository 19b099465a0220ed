// Package installer writes revision N of a target from a configuration
// source (a local folder, or ConfigMaps and Secrets read from the Kubernetes
// API), renders its operand and startup-monitor static-pod manifests and
// publishes them into the manifests dir, all under the target's lock, so that
// a crash at any point leaves either the previous state or the complete new
// revision.
package installer

import (
	"fmt"
	"os"
	"path"
	"sort"

	"github.com/revgate/revgate/revisions"
)

// Folder names inside a revision folder.
const (
	// ConfigMapsDir holds configmaps/<name>/<key> (files 0644, folders 0755).
	ConfigMapsDir = "configmaps"
	// SecretsDir holds secrets/<name>/<key> (files 0600, folders 0700).
	SecretsDir = "secrets"
)

// File and folder modes of a revision's configuration.
const (
	configMapFileMode = 0o644
	configMapDirMode  = 0o755
	secretFileMode    = 0o600
	secretDirMode     = 0o700
	revisionDirMode   = 0o755
)

// Config is the configuration of one revision: ConfigMaps and Secrets by name,
// each a map from key to content.
type Config struct {
	ConfigMaps map[string]map[string][]byte
	Secrets    map[string]map[string][]byte
}

// check refuses any name or key that is not a single valid path element, so
// that no key can write outside its folder.
func (c *Config) check() error {
	for _, kind := range []struct {
		dir  string
		objs map[string]map[string][]byte
	}{{ConfigMapsDir, c.ConfigMaps}, {SecretsDir, c.Secrets}} {
		for name, keys := range kind.objs {
			if err := revisions.ValidKey(name); err != nil {
				return fmt.Errorf("%s name %q refused: %w", kind.dir, name, err)
			}
			for key := range keys {
				if err := revisions.ValidKey(key); err != nil {
					return fmt.Errorf("key %q of %s/%s refused: %w", key, kind.dir, name, err)
				}
			}
		}
	}
	return nil
}

// fileEntry is one file of a revision's configuration.
type fileEntry struct {
	rel           string
	data          []byte
	mode, dirMode os.FileMode
}

// files lists every file of c in a stable order, with its mode.
func (c *Config) files() []fileEntry {
	var out []fileEntry
	add := func(dir string, objs map[string]map[string][]byte, mode, dirMode os.FileMode) {
		for _, name := range sortedKeys(objs) {
			keys := objs[name]
			for _, key := range sortedKeys(keys) {
				out = append(out, fileEntry{rel: path.Join(dir, name, key), data: keys[key], mode: mode, dirMode: dirMode})
			}
		}
	}
	add(ConfigMapsDir, c.ConfigMaps, configMapFileMode, configMapDirMode)
	add(SecretsDir, c.Secrets, secretFileMode, secretDirMode)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (c *Config) add(objs *map[string]map[string][]byte, name, key string, data []byte) error {
	if *objs == nil {
		*objs = map[string]map[string][]byte{}
	}
	keys := (*objs)[name]
	if keys == nil {
		keys = map[string][]byte{}
		(*objs)[name] = keys
	}
	if _, dup := keys[key]; dup {
		return fmt.Errorf("key %q of %q given twice", key, name)
	}
	keys[key] = data
	return nil
}

// AddConfigMapKey adds one key of a ConfigMap; a key given twice is an error.
func (c *Config) AddConfigMapKey(name, key string, data []byte) error {
	return c.add(&c.ConfigMaps, name, key, data)
}

// AddSecretKey adds one key of a Secret; a key given twice is an error.
func (c *Config) AddSecretKey(name, key string, data []byte) error {
	return c.add(&c.Secrets, name, key, data)
}
