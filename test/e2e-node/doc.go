// Package e2enode runs revgate on a real single-node cluster: a kubelet
// running static pods through containerd and runc, registered with a local
// kube-apiserver, all on loopback (hack/node/up.sh). The built revgate binary
// installs revisions into the kubelet's staticPodPath; the kubelet runs the
// gateway and the startup monitor as pods from the revgate:e2e image, and the
// tests drive the startup-monitor test plan through it: bad manifests, crash
// loops, revisions that never get ready or whose upstreams are down, and a
// node restart in the middle of a rollout.
//
// The suite runs only with REVGATE_E2E_NODE=1 (it needs root, installs
// containerd, runc and etcd from Debian when missing, and builds the kubelet
// and kube-apiserver once); otherwise every test skips. NODE_ROOT chooses the
// node's scratch folder (default /tmp/revgate-node) and
// REVGATE_E2E_NODE_KEEP=1 leaves the node running after the tests for a look.
package e2enode
