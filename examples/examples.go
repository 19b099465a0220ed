// Package examples embeds revgate's example gateway configuration (the YAML
// files beside this one) into the binary, so that `revgate run` serves the
// demo from any folder, with nothing of the repository at hand.
//
// The folder stays an installable source (`revgate install --source-dir
// examples`): the installer skips Go source files, and the proxy reads only
// YAML and JSON files from a plain folder.
package examples

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var files embed.FS

// FS returns the example configuration: YAML files at its top, no folders.
func FS() fs.FS { return files }
