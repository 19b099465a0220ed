package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/controller"
	"github.com/revgate/revgate/controller/rollout"
	"github.com/revgate/revgate/revisions"
)

// Timings of the node-by-node scenario's controllers: a node's status and
// turn stay valid for rolloutLease, long enough that a controller killed
// and started again at once is never taken for gone; a waiting node asks
// again every rolloutPoll.
const (
	rolloutLease = 15 * time.Second
	rolloutPoll  = 300 * time.Millisecond
)

// faultMarker, found in a revision's configuration, makes node-a's proxy
// crash (see crashWrapper); the scenario puts it into the annotation
// faultAnnotation of its Ingress.
const (
	faultMarker     = "crash-on-node-a"
	faultAnnotation = "e2e.revgate.io/fault"
)

// crashWrapper writes the --binary of node-a's pods: a script that runs
// `revgate proxy` with a configuration folder that does not exist (the
// proxy writes its start record, then exits 1: CrashLooping) when its
// revision's configuration holds faultMarker, and runs revgate unchanged
// otherwise. It stands for a cause that only one node has (a file, a
// kernel, a port missing there), as the startup-monitor test plan injects
// its faults.
func crashWrapper(t *testing.T, dir string) string {
	t.Helper()
	script := fmt.Sprintf(`#!/bin/sh
# Fault injection: see crashWrapper in test/e2e/nodes_test.go.
if [ "$1" = proxy ]; then
  for a in "$@"; do
    case "$a" in --config-dir=*) dir=${a#--config-dir=} ;; esac
  done
  if [ -n "$dir" ] && grep -rqs -- %q "$dir/configmaps"; then
    exec %q "$@" --config-dir=/nonexistent-fault-injected
  fi
fi
exec %q "$@"
`, faultMarker, revgateBin, revgateBin)
	p := filepath.Join(dir, "revgate-fault-wrapper")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// rolloutNode is one simulated node: its own root, ports, `revgate
// supervise` and `revgate controller`.
type rolloutNode struct {
	name string
	e    *env
	c    *cluster
}

// revisionsOf lists the node's installed revisions.
func (n *rolloutNode) revisionsOf(t *testing.T) []int {
	t.Helper()
	l, err := n.e.layout.List(revisions.OS())
	if err != nil {
		t.Fatal(err)
	}
	return l.Revisions
}

// holding returns the node's revisions holding each snapshot, by digest.
func (n *rolloutNode) holding(t *testing.T) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, r := range n.revisionsOf(t) {
		d, err := controller.RevisionDigest(n.e.layout.RevisionDir(r))
		if err != nil {
			t.Fatal(err)
		}
		out[d] = append(out[d], r)
	}
	return out
}

// revisionOf returns the node's one revision that holds snapshot digest,
// 0 when none; it fails the test when two do: the snapshot was installed
// twice.
func (n *rolloutNode) revisionOf(t *testing.T, digest string) int {
	t.Helper()
	revs := n.holding(t)[digest]
	switch len(revs) {
	case 0:
		return 0
	case 1:
		return revs[0]
	}
	t.Fatalf("%s installed snapshot %.12s twice: revisions %v", n.name, digest, revs)
	return 0
}

// leaseHistory records, in the API server's order, every change of the
// rollout status a node publishes in its Lease: "<node> <verdict>
// <digest>".
type leaseHistory struct {
	mu      sync.Mutex
	entries []string
	last    map[string]string
}

// watchLeases records the history of the target's status Leases in ns
// until the test ends.
func watchLeases(t *testing.T, client kubernetes.Interface, ns, target string) *leaseHistory {
	t.Helper()
	h := &leaseHistory{last: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	leases := client.CoordinationV1().Leases(ns)
	sel := rollout.TargetLabel + "=" + target
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		h.record(&list.Items[i])
	}
	go func() {
		defer close(done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			w, err := leases.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok || ev.Type == watch.Error {
					break
				}
				rv = l.ResourceVersion
				h.record(l)
			}
			w.Stop()
		}
	}()
	return h
}

func (h *leaseHistory) record(l *coordinationv1.Lease) {
	if l.Spec.HolderIdentity == nil {
		return
	}
	node := *l.Spec.HolderIdentity
	state := l.Annotations[rollout.AnnotationVerdict] + " " + l.Annotations[rollout.AnnotationDigest]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last[node] == state {
		return // a renewal
	}
	h.last[node] = state
	h.entries = append(h.entries, node+" "+state)
}

// of returns the history about snapshot digest: "<node> <verdict>".
func (h *leaseHistory) of(digest string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.entries {
		if f := strings.Fields(e); len(f) == 3 && f[2] == digest {
			out = append(out, f[0]+" "+f[1])
		}
	}
	return out
}

func (h *leaseHistory) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.entries, "\n")
}

// checkInOrder checks that snapshot digest reached the nodes one by one, in
// order, each after the node before it was judged good: in the Leases'
// history (every node announced it installs only after the previous one
// published its good verdict), and on disk (every node holds it in one
// revision, written after the previous node's monitor decided). It logs
// when each node's monitor judged it good.
func checkInOrder(t *testing.T, h *leaseHistory, digest string, since time.Time, nodes ...*rolloutNode) {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.name+" "+rollout.VerdictInstalling, n.name+" "+rollout.VerdictGood)
	}
	// The last verdict reaches the Lease after the monitor wrote it.
	waitFor(t, waitLong, fmt.Sprintf("%d changes about snapshot %.12s in the Leases' history", len(want), digest), func() (bool, string) {
		got := h.of(digest)
		return len(got) >= len(want), fmt.Sprint(got)
	})
	if got := h.of(digest); !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot %.12s in the Leases' history:\n%s\nwant:\n%s\nwhole history:\n%s", digest, strings.Join(got, "\n"), strings.Join(want, "\n"), h)
	}
	var prevDecided time.Time
	var figures []string
	for i, n := range nodes {
		rev := n.revisionOf(t, digest)
		if rev == 0 {
			t.Fatalf("%s holds no revision of snapshot %.12s", n.name, digest)
		}
		rs := n.e.state().Revisions[rev]
		if rs == nil || rs.Outcome != revisions.OutcomeGood {
			t.Fatalf("%s's revision %d of snapshot %.12s: state %+v", n.name, rev, digest, rs)
		}
		if i > 0 && !rs.InstalledAt.After(prevDecided) {
			t.Fatalf("%s installed revision %d at %s, before %s's monitor judged the snapshot good at %s",
				n.name, rev, rs.InstalledAt.Format(time.RFC3339Nano), nodes[i-1].name, prevDecided.Format(time.RFC3339Nano))
		}
		prevDecided = rs.DecidedAt
		figures = append(figures, fmt.Sprintf("%s=%.1fs", n.name, rs.DecidedAt.Sub(since).Seconds()))
	}
	t.Logf("node-by-node snapshot=%.12s good-after %s", digest, strings.Join(figures, " "))
}

// TestNodeByNodeRollout runs three simulated nodes on this machine, each
// with its own root, ports and node name, a real `revgate supervise` and a
// real `revgate controller --rollout=node-by-node`, against the real API
// server:
//
//   - the first snapshot reaches node-a, node-b and node-c in that order,
//     each only after the node before it was judged good;
//   - a snapshot that crash-loops on node-a (fault injection: node-a's pods
//     run crashWrapper, which crashes the proxy of a revision holding
//     faultMarker) never reaches node-b or node-c; the rollout stops with a
//     RolloutStopped Event naming node-a and CrashLooping;
//   - a newer snapshot starts a new rollout; node-b's controller is killed
//     (SIGKILL) while node-b installs it and its monitor judges it, and
//     node-c's while it waits for its turn; both start again and the
//     rollout completes in order, with no node installing a snapshot twice
//     (revisions counted on disk).
func TestNodeByNodeRollout(t *testing.T) {
	t.Parallel()
	ip := hostIP(t)
	client, ns := newNamespace(t)
	v1, v2 := startHostUpstream(t, "v1", ip), startHostUpstream(t, "v2", ip)
	history := watchLeases(t, client, ns, revisions.DefaultTarget)

	var nodes []*rolloutNode
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		e := newEnv(t)
		n := &rolloutNode{name: name, e: e, c: newNode(t, e, client, ns, name)}
		n.c.args = append(n.c.args,
			"--rollout=node-by-node",
			"--rollout-namespace="+ns,
			"--rollout-lease-duration="+rolloutLease.String(),
			"--rollout-poll="+rolloutPoll.String())
		nodes = append(nodes, n)
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	a.c.args = append(a.c.args, "--binary="+crashWrapper(t, a.e.root))
	// node-b's monitor wants 15 good readiness checks in a row (3 s):
	// the window in which its controller is killed below.
	b.c.args = append(b.c.args, "--monitor-arg=--ready-successes=15")

	a.c.service("web", v1)
	a.c.service("web2", v2)
	a.c.ingress("web", "", "web")
	start := time.Now()
	for _, n := range nodes {
		n.e.startSupervise()
		n.c.startController()
	}
	step := func(what string) { t.Logf("%5.1fs step: %s", time.Since(start).Seconds(), what) }

	step("the first snapshot reaches the three nodes in order")
	for _, n := range nodes {
		n.e.waitGood(1, "v1")
	}
	s1, err := controller.RevisionDigest(a.e.layout.RevisionDir(1))
	if err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, history, s1, start, a, b, c)

	step("a snapshot that crash-loops on node-a stops there")
	editIngress(t, client, ns, "web", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{faultAnnotation: faultMarker}
	})
	published := time.Now()
	a.e.waitFallback(2, 1, revisions.ReasonCrashLooping, "v1")
	s2, err := controller.RevisionDigest(a.e.layout.RevisionDir(2))
	if err != nil {
		t.Fatal(err)
	}
	stopped := waitRolloutStopped(t, client, ns)
	t.Logf("node-by-node stopped-after=%.1fs", time.Since(published).Seconds())
	for _, want := range []string{"node node-a", "with " + revisions.ReasonCrashLooping, s2[:12]} {
		if !strings.Contains(stopped.Message, want) {
			t.Fatalf("RolloutStopped Event %q does not name %q", stopped.Message, want)
		}
	}
	// node-b and node-c saw the snapshot and held it back.
	for _, n := range []*rolloutNode{b, c} {
		waitFor(t, waitLong, n.name+" holding snapshot 2 back", func() (bool, string) {
			log, _ := os.ReadFile(n.c.logPath())
			for _, line := range strings.Split(string(log), "\n") {
				if strings.Contains(line, "a node fell back from it") && strings.Contains(line, s2) && strings.Contains(line, "failed_node=node-a") {
					return true, ""
				}
			}
			return false, "no log line"
		})
	}
	if got := history.of(s2); !reflect.DeepEqual(got, []string{"node-a Installing", "node-a Failed"}) {
		t.Fatalf("snapshot 2 in the Leases' history: %v\n%s", got, history)
	}
	for _, n := range []*rolloutNode{b, c} {
		if revs := n.revisionsOf(t); !reflect.DeepEqual(revs, []int{1}) {
			t.Fatalf("%s installed %v: the snapshot that failed on node-a reached it", n.name, revs)
		}
		if ok, detail := n.e.serving(1, "v1"); !ok {
			t.Fatalf("%s: %s", n.name, detail)
		}
	}

	step("a newer snapshot starts over; node-b's and node-c's controllers are killed mid-rollout")
	// One update: an edit in two steps could render the first snapshot
	// again in between.
	editIngress(t, client, ns, "web", func(ing *networkingv1.Ingress) {
		delete(ing.Annotations, faultAnnotation)
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "web2"
	})
	s3Start := time.Now()
	waitFor(t, waitLong, "node-b rolling out its revision 2", func() (bool, string) {
		return b.e.newest() == 2, fmt.Sprint("newest published ", b.e.newest())
	})
	s3, err := controller.RevisionDigest(b.e.layout.RevisionDir(2))
	if err != nil {
		t.Fatal(err)
	}
	b.c.signalController(syscall.SIGKILL)
	c.c.signalController(syscall.SIGKILL)
	// With node-b's controller gone, no verdict of node-b can follow.
	waitFor(t, 10*time.Second, "node-b installing snapshot 3 in the Leases' history", func() (bool, string) {
		got := history.of(s3)
		return reflect.DeepEqual(got, []string{"node-a Installing", "node-a Good", "node-b Installing"}), fmt.Sprint(got)
	})
	if revs := c.revisionsOf(t); !reflect.DeepEqual(revs, []int{1}) {
		t.Fatalf("node-c installed %v before node-b's verdict", revs)
	}
	b.c.startController()
	c.c.startController()
	a.e.waitGood(3, "v2")
	b.e.waitGood(2, "v2")
	c.e.waitGood(2, "v2")
	checkInOrder(t, history, s3, s3Start, a, b, c)

	step("revisions on disk: one per snapshot a node installed")
	for _, tt := range []struct {
		n    *rolloutNode
		want map[string][]int
	}{
		{a, map[string][]int{s1: {1}, s2: {2}, s3: {3}}},
		{b, map[string][]int{s1: {1}, s3: {2}}},
		{c, map[string][]int{s1: {1}, s3: {2}}},
	} {
		if got := tt.n.holding(t); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s holds %v, want %v", tt.n.name, got, tt.want)
		}
	}
	if evs := rolloutEvents(t, client, ns, rollout.EventStopped); len(evs) != 1 {
		t.Errorf("%d RolloutStopped Events, want the one of snapshot 2", len(evs))
	}
	step("done")
}

// editIngress applies edit to an Ingress in one update.
func editIngress(t *testing.T, client kubernetes.Interface, ns, name string, edit func(*networkingv1.Ingress)) {
	t.Helper()
	ings := client.NetworkingV1().Ingresses(ns)
	for {
		ing, err := ings.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(ing)
		_, err = ings.Update(context.Background(), ing, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

// rolloutEvents lists the Events of the rollout with reason in ns.
func rolloutEvents(t *testing.T, client kubernetes.Interface, ns, reason string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitRolloutStopped waits for the RolloutStopped Event and returns it.
func waitRolloutStopped(t *testing.T, client kubernetes.Interface, ns string) corev1.Event {
	t.Helper()
	var ev corev1.Event
	waitFor(t, waitLong, "a RolloutStopped Event", func() (bool, string) {
		evs := rolloutEvents(t, client, ns, rollout.EventStopped)
		if len(evs) == 0 {
			return false, "none"
		}
		ev = evs[0]
		return true, ""
	})
	if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "Lease" || ev.InvolvedObject.Name != rollout.TurnLeaseName(revisions.DefaultTarget) {
		t.Fatalf("RolloutStopped Event %s on %s %s", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
	}
	return ev
}
