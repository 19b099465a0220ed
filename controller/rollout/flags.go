package rollout

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// Values of --rollout.
const (
	// ModeImmediate installs every snapshot as soon as the node renders it,
	// whatever other nodes do: a single node's rollout, the default.
	ModeImmediate = "immediate"
	// ModeNodeByNode rolls every snapshot out one node at a time, through
	// the Leases of this package.
	ModeNodeByNode = "node-by-node"
)

// Flags are the command-line options of `revgate controller` about
// rollouts. The node's identity in the rollout is the controller's
// --node-name, and the nodes that take turns are those of one --target.
type Flags struct {
	// Mode is ModeImmediate (the default) or ModeNodeByNode (--rollout).
	Mode string
	// Namespace holds the Leases and their Events (--rollout-namespace);
	// default kube-system.
	Namespace string
	// LeaseDuration (--rollout-lease-duration); default 40s.
	LeaseDuration time.Duration
	// Poll (--rollout-poll); default 5s.
	Poll time.Duration
	// StoppedRecheck (--rollout-stopped-recheck); default 1m.
	StoppedRecheck time.Duration
}

// AddFlags registers the flags, with their defaults.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	if f.Mode == "" {
		f.Mode = ModeImmediate
	}
	if f.Namespace == "" {
		f.Namespace = DefaultNamespace
	}
	if f.LeaseDuration == 0 {
		f.LeaseDuration = DefaultLeaseDuration
	}
	if f.Poll == 0 {
		f.Poll = DefaultPoll
	}
	if f.StoppedRecheck == 0 {
		f.StoppedRecheck = DefaultStoppedRecheck
	}
	fs.StringVar(&f.Mode, "rollout", f.Mode, `how snapshots reach the nodes: "immediate" installs each at once (a single node), "node-by-node" installs it on one node at a time, in the order of the node names, each after the previous node's startup monitor judged it good, coordinated through Leases`)
	fs.StringVar(&f.Namespace, "rollout-namespace", f.Namespace, "namespace of the node-by-node rollout's Leases and Events (the same on every node)")
	fs.DurationVar(&f.LeaseDuration, "rollout-lease-duration", f.LeaseDuration, "how long a node's rollout status and its turn stay valid without renewal; a node silent for longer is not waited for, unless it went silent while installing the snapshot")
	fs.DurationVar(&f.Poll, "rollout-poll", f.Poll, "how often a node waiting for its turn asks again")
	fs.DurationVar(&f.StoppedRecheck, "rollout-stopped-recheck", f.StoppedRecheck, "how often a node asks again about a snapshot that another node fell back from (a new snapshot is asked about at once)")
}

// NodeByNode reports whether rollouts go node by node.
func (f Flags) NodeByNode() bool { return f.Mode == ModeNodeByNode }

// Validate checks the flags for the given target and node name, which name
// the node's Lease.
func (f Flags) Validate(target, node string) error {
	switch f.Mode {
	case ModeImmediate, "":
		return nil
	case ModeNodeByNode:
	default:
		return fmt.Errorf("invalid --rollout %q: want %q or %q", f.Mode, ModeImmediate, ModeNodeByNode)
	}
	var errs []error
	if msgs := validation.IsDNS1123Label(f.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid --rollout-namespace %q: %v", f.Namespace, msgs))
	}
	if f.LeaseDuration < minLeaseDuration {
		errs = append(errs, fmt.Errorf("--rollout-lease-duration %s is below %s", f.LeaseDuration, minLeaseDuration))
	}
	if f.Poll <= 0 {
		errs = append(errs, fmt.Errorf("--rollout-poll %s must be positive", f.Poll))
	}
	if f.StoppedRecheck <= 0 {
		errs = append(errs, fmt.Errorf("--rollout-stopped-recheck %s must be positive", f.StoppedRecheck))
	}
	if msgs := validation.IsDNS1123Subdomain(StatusLeaseName(target, node)); node != "" && len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--node-name %q cannot name a Lease (%s): %v", node, StatusLeaseName(target, node), msgs))
	}
	return errors.Join(errs...)
}

// New returns this node's part in node-by-node rollouts of target.
func (f Flags) New(client kubernetes.Interface, target, node string, log *slog.Logger) (*Rollout, error) {
	return New(Options{Client: client, Namespace: f.Namespace, Target: target, Node: node,
		LeaseDuration: f.LeaseDuration, Poll: f.Poll, StoppedRecheck: f.StoppedRecheck, Logger: log})
}
