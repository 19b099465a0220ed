package main

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/revgate/revgate/demo"
	"github.com/revgate/revgate/examples"
	"github.com/revgate/revgate/revisions"
)

// demoDefaultPorts are the ports of demo.DefaultUpstreams, which the example
// configuration points at.
func demoDefaultPorts() []int {
	ports := make([]int, len(demo.DefaultUpstreams))
	for i, u := range demo.DefaultUpstreams {
		_, p, _ := net.SplitHostPort(u.Addr)
		ports[i], _ = strconv.Atoi(p)
	}
	return ports
}

func (o *runOptions) validateDemoPorts() error {
	if len(o.demoPorts) != len(demo.DefaultUpstreams) {
		return fmt.Errorf("--demo-ports: want %d ports, got %d", len(demo.DefaultUpstreams), len(o.demoPorts))
	}
	seen := map[int]bool{}
	for _, p := range o.demoPorts {
		if p < 1 || p > 65535 || seen[p] {
			return fmt.Errorf("--demo-ports: %d is out of range 1-65535 or given twice", p)
		}
		seen[p] = true
	}
	return nil
}

// demoUpstreams are demo.DefaultUpstreams moved to --demo-ports.
func (o *runOptions) demoUpstreams() []demo.Upstream {
	ups := append([]demo.Upstream(nil), demo.DefaultUpstreams...)
	for i := range ups {
		host, _, _ := net.SplitHostPort(ups[i].Addr)
		if i < len(o.demoPorts) {
			ups[i].Addr = net.JoinHostPort(host, strconv.Itoa(o.demoPorts[i]))
		}
	}
	return ups
}

// resolveSource picks the configuration of revision 1 when --source is not
// given: ./examples when it is a folder (a checkout of the repository),
// otherwise the copy built into the binary, to be written to <root>/examples.
func (o *runOptions) resolveSource() {
	if o.source != "" {
		return
	}
	if fi, err := os.Stat(defaultRunSource); err == nil && fi.IsDir() {
		o.source = defaultRunSource
		return
	}
	o.source, o.embedded = filepath.Join(o.root, "examples"), true
}

// demoPortLine matches the lines of the example configuration that name an
// upstream port: a Service's targetPort and an EndpointSlice's port.
var demoPortLine = regexp.MustCompile(`(?m)^(\s*(?:-\s*)?(?:port|targetPort):\s*)(\d+)[ \t]*$`)

// writeExamples writes the embedded example configuration into dir (created
// when missing), its demo upstream ports moved to ports. Only whole port
// lines with a default demo port change, so the comments stay as written.
func writeExamples(dir string, ports []int) error {
	moved := map[string]string{}
	for i, p := range demoDefaultPorts() {
		if i < len(ports) {
			moved[strconv.Itoa(p)] = strconv.Itoa(ports[i])
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return fs.WalkDir(examples.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(examples.FS(), name)
		if err != nil {
			return err
		}
		data = demoPortLine.ReplaceAllFunc(data, func(line []byte) []byte {
			m := demoPortLine.FindSubmatch(line)
			if to, ok := moved[string(m[2])]; ok {
				return append(append([]byte(nil), m[1]...), to...)
			}
			return line
		})
		if err := revisions.OS().WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o644); err != nil {
			return fmt.Errorf("write the example configuration: %w", err)
		}
		return nil
	})
}
