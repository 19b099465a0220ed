// Package rollout rolls a snapshot of the gateway configuration out node by
// node when several nodes run `revgate controller`: the next node installs
// a snapshot only after the previous node's startup monitor judged it good,
// a fallback on any node stops that snapshot, and a newer snapshot starts a
// rollout of its own.
//
// The nodes coordinate through the Kubernetes API alone, with
// coordination.k8s.io Leases in one namespace:
//
//   - every node publishes its status in a Lease of its own,
//     revgate-rollout.<target>.<node>, labelled revgate.io/rollout-target:
//     the digest of the snapshot it installed last, the revision that holds
//     it and the monitor's verdict (Installing, Good or Failed, with reason,
//     message and attempt) as annotations under rollout.revgate.io/. The
//     Lease is renewed while the node runs; a node whose Lease expired is
//     not waited for.
//   - one Lease per target, revgate-rollout.<target>, is the turn: the node
//     holding it is the one installing, so at most one node rolls a snapshot
//     out at a time even while nodes join or leave. Taking and releasing it
//     are updates with the Lease's resourceVersion, the API server's own
//     compare-and-swap; there is no consensus here.
//
// Nodes take their turn in the order of their names. A node may install
// snapshot H when no other node reports a failure on H, every live node
// before it reports H good (a node that went quiet while installing H holds
// H back too), and it holds the turn (or takes it, free or expired). It
// writes Installing into its status before it installs, and its verdict
// when the monitor decided; a verdict releases the turn, and a node asked
// about another snapshot gives up a turn it holds for an older one. A node
// that just published its first status waits a short join grace before its
// first turn, so that nodes started together have all published theirs.
// A restarted controller finds its status and its turn in the API server:
// it resumes where it stopped, and its own controller, which compares the
// snapshot with the highest installed revision, installs nothing twice.
//
// Events on the turn Lease say which node installs a snapshot, which node
// judged it good, and which node's fallback stopped it and why.
//
// A Rollout is the controller's controller.Rollout seam: `revgate
// controller --rollout=node-by-node` (Flags) makes one for the node named by
// --node-name and the target named by --target, and renews its Leases with
// Run while the controller runs. PolicyRules are the rights it needs in the
// Leases' namespace; deploy/controller/rbac.yaml grants them.
package rollout
