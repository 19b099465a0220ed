package rollout

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/revgate/revgate/controller"
	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// digestFile is the configuration key that carries a simulated snapshot's
// digest, so that a node reads back which snapshot a revision holds.
const digestFile = "digest"

// cluster is the API server shared by simulated nodes of one target, with
// a log of what happened in order.
type cluster struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
	target string
	// clock is the nodes' clock, stepped by the test.
	clock *clocktest.Clock

	mu      sync.Mutex
	history []string
}

func newCluster(t *testing.T, target string) *cluster {
	t.Helper()
	cs, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	// A namespace of its own: a DNS label made from the test's name.
	ns := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	ns = fmt.Sprintf("%s-%04x", strings.Trim(ns, "-"), rand.IntN(1<<16))
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Leases keep their times to the microsecond.
	return &cluster{t: t, client: cs, ns: ns, target: target, clock: clocktest.New(time.Now().Truncate(time.Second))}
}

func (c *cluster) record(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, fmt.Sprintf(format, args...))
}

func (c *cluster) log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.history)
}

// node is a simulated node: its own root with revisions written by the
// real installer, a Rollout, and what its controller does with them: it
// compares the snapshot with the highest installed revision, installs when
// the rollout lets it, and reports the monitor's verdict from the state file.
type node struct {
	c    *cluster
	name string
	l    revisions.Layout
	r    *Rollout
}

func (c *cluster) node(name string, client kubernetes.Interface) *node {
	c.t.Helper()
	root := c.t.TempDir()
	n := &node{c: c, name: name, l: revisions.Layout{
		Target:         c.target,
		ResourceDir:    filepath.Join(root, "resources"),
		ManifestsDir:   filepath.Join(root, "manifests"),
		LockFile:       filepath.Join(root, "lock"),
		TerminationLog: filepath.Join(root, "log", "termination.log"),
	}.Defaulted()}
	n.restart(client)
	return n
}

// restart stands for a controller killed and started again: a new Rollout
// with nothing in memory.
func (n *node) restart(client kubernetes.Interface) {
	n.c.t.Helper()
	if client == nil {
		client = n.c.client
	}
	r, err := New(Options{Client: client, Namespace: n.c.ns, Target: n.c.target, Node: n.name,
		LeaseDuration: 30 * time.Second, Clock: n.c.clock, Logger: quiet})
	if err != nil {
		n.c.t.Fatal(err)
	}
	n.r = r
}

// holding returns the highest revision and the digest it holds.
func (n *node) holding() (int, string) {
	n.c.t.Helper()
	lst, err := n.l.List(revisions.OS())
	if err != nil {
		n.c.t.Fatal(err)
	}
	h := lst.Highest()
	if h == 0 {
		return 0, ""
	}
	data, err := os.ReadFile(filepath.Join(n.l.RevisionDir(h), installer.ConfigMapsDir, "config", digestFile))
	if err != nil {
		n.c.t.Fatal(err)
	}
	return h, string(data)
}

// reconcile is one pass of the node's controller over snapshot digest.
func (n *node) reconcile(digest string) error {
	ctx := context.Background()
	if h, d := n.holding(); d == digest {
		st, err := revisions.LoadState(revisions.OS(), n.l.StateFile())
		if err != nil {
			return err
		}
		rs := st.Revisions[h]
		if rs == nil || (rs.Outcome != revisions.OutcomeGood && rs.Outcome != revisions.OutcomeFailed) {
			return nil
		}
		return n.r.Report(ctx, digest, controller.Verdict{Revision: h, Outcome: rs.Outcome, Reason: rs.Reason, Message: rs.Message, Attempt: rs.Attempts})
	}
	ok, _, err := n.r.MayInstall(ctx, digest)
	if err != nil || !ok {
		return err
	}
	return n.install(digest)
}

func (n *node) install(digest string) error {
	cfg := &installer.Config{}
	if err := cfg.AddConfigMapKey("config", digestFile, []byte(digest)); err != nil {
		return err
	}
	in := &installer.Installer{Layout: n.l, Source: source{cfg}, Render: installer.RenderOptions{Binary: "/bin/revgate"},
		NoPublish: true, Logger: quiet}
	res, err := in.Run(context.Background())
	if err != nil {
		return err
	}
	n.c.record("install %s %s r%d", n.name, digest, res.Revision)
	return nil
}

type source struct{ cfg *installer.Config }

func (s source) Load(context.Context) (*installer.Config, error) { return s.cfg, nil }

// judge records the monitor's verdict on the node's highest revision, as the
// startup monitor writes it into the state file.
func (n *node) judge(outcome revisions.Outcome, reason string) {
	n.c.t.Helper()
	h, d := n.holding()
	err := revisions.UpdateState(revisions.OS(), n.l.StateFile(), func(s *revisions.State) error {
		rs := s.Get(h)
		rs.Attempts = max(rs.Attempts, 1)
		if rs.Outcome == revisions.OutcomeFailed && outcome != revisions.OutcomeFailed {
			rs.Attempts++ // a retry
		}
		rs.Outcome, rs.Reason, rs.Message = outcome, reason, ""
		if reason != "" {
			rs.Message = "the monitor's message about " + reason
		}
		return nil
	})
	if err != nil {
		n.c.t.Fatal(err)
	}
	n.c.record("judge %s %s r%d %s", n.name, d, h, outcome)
}

// round reconciles every node at once, in parallel.
func (c *cluster) round(digest string, nodes ...*node) {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range rand.Perm(len(nodes)) {
		wg.Go(func() { errs[i] = nodes[n].reconcile(digest) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// judgeInstalled has each node's monitor judge a revision it has not judged yet.
func (c *cluster) judgeInstalled(outcome func(n *node) (revisions.Outcome, string), nodes ...*node) {
	c.t.Helper()
	for _, n := range nodes {
		h, _ := n.holding()
		if h == 0 {
			continue
		}
		st, err := revisions.LoadState(revisions.OS(), n.l.StateFile())
		if err != nil {
			c.t.Fatal(err)
		}
		if rs := st.Revisions[h]; rs != nil && rs.Outcome == revisions.OutcomeInstalled {
			o, reason := outcome(n)
			n.judge(o, reason)
		}
	}
}

func allGood(*node) (revisions.Outcome, string) { return revisions.OutcomeGood, "" }

// rollOut runs rounds of reconciling and judging until every node holds
// digest with a verdict reported, or rounds run out.
func (c *cluster) rollOut(digest string, rounds int, outcome func(*node) (revisions.Outcome, string), nodes ...*node) {
	c.t.Helper()
	// The last node first: it must wait for the others all the same.
	for i := len(nodes) - 1; i >= 0; i-- {
		if err := nodes[i].reconcile(digest); err != nil {
			c.t.Fatal(err)
		}
	}
	for range rounds {
		c.round(digest, nodes...)
		c.judgeInstalled(outcome, nodes...)
	}
	c.round(digest, nodes...) // report the last verdicts
}

// installs lists the "install" lines of the history about digest.
func (c *cluster) installs(digest string) []string {
	var out []string
	for _, h := range c.log() {
		if f := strings.Fields(h); f[0] == "install" && f[2] == digest {
			out = append(out, f[1])
		}
	}
	return out
}

// checkOrder checks that each node installed digest once, in order, and
// only after the node before it was judged good.
func (c *cluster) checkOrder(digest string, names ...string) {
	c.t.Helper()
	if got := c.installs(digest); !slices.Equal(got, names) {
		c.t.Fatalf("snapshot %s installed on %v, want %v\n%s", digest, got, names, strings.Join(c.log(), "\n"))
	}
	hist := c.log()
	pos := func(prefix, suffix string) int {
		for i, h := range hist {
			if strings.HasPrefix(h, prefix) && strings.HasSuffix(h, suffix) {
				return i
			}
		}
		return -1
	}
	for i := 1; i < len(names); i++ {
		good := pos(fmt.Sprintf("judge %s %s ", names[i-1], digest), " "+string(revisions.OutcomeGood))
		inst := pos(fmt.Sprintf("install %s %s ", names[i], digest), "")
		if good < 0 || inst < good {
			c.t.Fatalf("%s installed %s before %s's monitor judged it good:\n%s", names[i], digest, names[i-1], strings.Join(hist, "\n"))
		}
	}
}

func (c *cluster) events(reason string) []string {
	c.t.Helper()
	list, err := c.client.CoreV1().Events(c.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind != "Lease" || ev.InvolvedObject.Name != TurnLeaseName(c.target) {
			c.t.Fatalf("event %s on %s/%s", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
		}
		out = append(out, ev.Message)
	}
	return out
}

// joinGrace is the nodes' JoinGrace: a third of their lease duration.
const joinGrace = 10 * time.Second

// join has the nodes publish their status, as their heartbeats do once
// their controllers start, and lets the join grace pass.
func (c *cluster) join(nodes ...*node) {
	c.t.Helper()
	for _, n := range nodes {
		if _, err := n.r.writeStatus(context.Background(), nil); err != nil {
			c.t.Fatal(err)
		}
	}
	c.clock.Step(joinGrace)
}

// threeNodes starts three nodes that have joined.
func threeNodes(t *testing.T) (*cluster, []*node) {
	c := newCluster(t, "gw")
	// Made in another order than the names: the order is the names'.
	b, c3, a := c.node("node-b", nil), c.node("node-c", nil), c.node("node-a", nil)
	c.join(b, c3, a)
	return c, []*node{a, b, c3}
}

// TestNodesStartingTogetherTakeTurnsByName: the last node by name asks
// first, before the others published anything: it waits the join grace, by
// which time the others are known, and the turns follow the names.
func TestNodesStartingTogetherTakeTurnsByName(t *testing.T) {
	c := newCluster(t, "gw")
	a, b, n3 := c.node("node-a", nil), c.node("node-b", nil), c.node("node-c", nil)
	ok, after, err := n3.r.MayInstall(context.Background(), "h1")
	if ok || err != nil || after != joinGrace {
		t.Fatalf("a node that just joined may install: %v, ask again after %s, %v", ok, after, err)
	}
	c.join(a, b)
	c.rollOut("h1", 6, allGood, a, b, n3)
	c.checkOrder("h1", "node-a", "node-b", "node-c")
}

// TestGoodSnapshotReachesEveryNodeInOrder: each node installs the snapshot
// only after the node before it was judged good, every node once.
func TestGoodSnapshotReachesEveryNodeInOrder(t *testing.T) {
	c, nodes := threeNodes(t)
	c.rollOut("h1", 6, allGood, nodes...)
	c.checkOrder("h1", "node-a", "node-b", "node-c")
	if got := c.events(EventNodeGood); len(got) != 3 {
		t.Fatalf("RolloutNodeGood events %q", got)
	}
	for _, n := range nodes {
		if _, d := n.holding(); d != "h1" {
			t.Fatalf("%s holds %q", n.name, d)
		}
	}
	st, err := nodes[0].r.Statuses(context.Background())
	if err != nil || len(st) != 3 {
		t.Fatalf("statuses %+v %v", st, err)
	}
	for _, s := range st {
		if s.Digest != "h1" || s.Verdict != VerdictGood || !s.Live || s.Revision != 1 {
			t.Fatalf("status %+v", s)
		}
	}
	if got := c.events(EventNodeGood); !strings.Contains(strings.Join(got, "\n"), "node node-c: revision 1 of snapshot h1 is good (3 of 3 nodes good)") {
		t.Fatalf("good events %q", got)
	}
}

// TestFallbackStopsTheSnapshotAndANewerOneStartsOver: a snapshot that
// crash-loops on the first node never reaches the second; an Event names
// the node and the reason; a newer snapshot rolls out from the first node.
func TestFallbackStopsTheSnapshotAndANewerOneStartsOver(t *testing.T) {
	c, nodes := threeNodes(t)
	c.rollOut("h1", 6, allGood, nodes...)
	crash := func(n *node) (revisions.Outcome, string) {
		if n.name == "node-a" {
			return revisions.OutcomeFailed, revisions.ReasonCrashLooping
		}
		return revisions.OutcomeGood, ""
	}
	c.rollOut("h2", 6, crash, nodes...)
	if got := c.installs("h2"); !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("h2 installed on %v, want node-a alone\n%s", got, strings.Join(c.log(), "\n"))
	}
	stopped := c.events(EventStopped)
	if len(stopped) != 1 || !strings.Contains(stopped[0], "node node-a fell back from revision 2 of snapshot h2 with CrashLooping") {
		t.Fatalf("RolloutStopped events %q", stopped)
	}
	// The other nodes ask again later, not at once.
	if ok, after, err := nodes[1].r.MayInstall(context.Background(), "h2"); ok || err != nil || after != DefaultStoppedRecheck {
		t.Fatalf("node-b may install h2: %v, ask again after %s, %v", ok, after, err)
	}

	c.rollOut("h3", 6, allGood, nodes...)
	c.checkOrder("h3", "node-a", "node-b", "node-c")
	if got := c.events(EventStopped); len(got) != 1 {
		t.Fatalf("RolloutStopped events %q", got)
	}
}

// TestRetriedFailureThatTurnsGoodGoesOn: a revision failing for a retried
// reason holds the snapshot back until its retry is judged good.
func TestRetriedFailureThatTurnsGoodGoesOn(t *testing.T) {
	c, nodes := threeNodes(t)
	a := nodes[0]
	c.round("h1", nodes...)
	a.judge(revisions.OutcomeFailed, revisions.ReasonNotReady)
	for range 3 {
		c.round("h1", nodes...)
	}
	if got := c.installs("h1"); !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("installed on %v while node-a's retry is pending", got)
	}
	a.judge(revisions.OutcomeGood, "")
	c.rollOut("h1", 6, allGood, nodes...)
	c.checkOrder("h1", "node-a", "node-b", "node-c")
}

// TestKilledControllerResumesWithoutInstallingTwice kills node-b's
// controller right after the rollout let it install, before and after it
// installed: the restarted controller installs the snapshot once, node-c
// waits for node-b's verdict, and the rollout completes.
func TestKilledControllerResumesWithoutInstallingTwice(t *testing.T) {
	for _, tt := range []struct {
		name      string
		installed bool
	}{
		{"before installing", false},
		{"after installing", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, nodes := threeNodes(t)
			a, b, n3 := nodes[0], nodes[1], nodes[2]
			c.rollOut("h1", 6, allGood, nodes...)
			c.round("h2", a)
			a.judge(revisions.OutcomeGood, "")
			c.round("h2", a)
			ok, _, err := b.r.MayInstall(context.Background(), "h2")
			if err != nil || !ok {
				t.Fatalf("node-b may install h2: %v %v", ok, err)
			}
			if tt.installed {
				if err := b.install("h2"); err != nil {
					t.Fatal(err)
				}
			}
			b.restart(nil)
			c.round("h2", n3) // node-c waits for node-b
			c.rollOut("h2", 6, allGood, nodes...)
			c.checkOrder("h2", "node-a", "node-b", "node-c")
			lst, err := b.l.List(revisions.OS())
			if err != nil || !slices.Equal(lst.Revisions, []int{1, 2}) {
				t.Fatalf("node-b's revisions %v %v: installed twice", lst.Revisions, err)
			}
		})
	}
}

// TestGoneNodes: a node whose status expired is not waited for, unless it
// went quiet while installing this very snapshot.
func TestGoneNodes(t *testing.T) {
	c, nodes := threeNodes(t)
	a, b, n3 := nodes[0], nodes[1], nodes[2]
	c.rollOut("h1", 6, allGood, nodes...)

	// node-b stops while it installs h2.
	c.rollOut("h2", 1, allGood, a)
	c.round("h2", b)
	if got := c.installs("h2"); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Fatalf("h2 installed on %v", got)
	}
	c.clock.Step(time.Minute)
	c.rollOut("h2", 3, allGood, a, n3)
	if got := c.installs("h2"); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Fatalf("h2 went past node-b, which went quiet while installing it: %v", got)
	}
	// A newer snapshot goes past the quiet node.
	c.rollOut("h3", 4, allGood, a, n3)
	c.checkOrder("h3", "node-a", "node-c")
}

// TestLeastPrivilege runs a rollout with the permissions of PolicyRules
// alone, granted in the Leases' namespace.
func TestLeastPrivilege(t *testing.T) {
	c := newCluster(t, "gw")
	ctx := context.Background()
	if _, err := c.client.RbacV1().Roles(c.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "revgate-rollout"}, Rules: PolicyRules()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.RbacV1().RoleBindings(c.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "revgate-rollout"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "revgate-rollout"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "revgate-controllers"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	for _, name := range []string{"node-a", "node-b"} {
		cfg := rest.CopyConfig(kubetest.Config(t))
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + name, Groups: []string{"revgate-controllers"}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, c.node(name, cs))
	}
	// The binding reaches the authorizer's cache within a moment.
	waitFor(t, "the Role bound", func() (bool, string) {
		_, err := nodes[0].r.Statuses(ctx)
		return err == nil, fmt.Sprint(err)
	})
	c.join(nodes...)
	c.rollOut("h1", 4, allGood, nodes...)
	c.checkOrder("h1", "node-a", "node-b")
	if got := c.events(EventNodeGood); len(got) != 2 {
		t.Fatalf("events written with the rollout's permissions: %q", got)
	}
}

// TestRunRenewsTheLeases: Run renews the node's status and the turn it
// holds every third of the lease duration, on the rollout's clock, so that
// both stay live for as long as it runs; once it stops, the node's status
// expires.
func TestRunRenewsTheLeases(t *testing.T) {
	c := newCluster(t, "gw")
	a, b := c.node("node-a", nil), c.node("node-b", nil)
	c.join(a, b)
	ctx := context.Background()
	if ok, after, err := a.r.MayInstall(ctx, "h1"); !ok || err != nil {
		t.Fatalf("node-a may not take its turn: ask again after %s, %v", after, err)
	}
	renewed := func(name string) time.Time {
		l, err := c.client.CoordinationV1().Leases(c.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			t.Fatalf("lease %s: %v", name, err)
		}
		return l.Spec.RenewTime.Time
	}
	waitRenewed := func(at time.Time) {
		t.Helper()
		for _, name := range []string{StatusLeaseName(c.target, "node-a"), TurnLeaseName(c.target)} {
			waitFor(t, name+" renewed at "+at.String(), func() (bool, string) {
				got := renewed(name)
				return got.Equal(at), got.String()
			})
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.r.Run(runCtx) }()
	period := 10 * time.Second // a third of the nodes' lease duration
	waitFor(t, "the renewal ticker", func() (bool, string) { return c.clock.Tickers(period) == 1, "" })
	waitRenewed(c.clock.Now())
	for range 4 {
		c.clock.Step(period)
		waitRenewed(c.clock.Now())
	}
	// 40s after node-a took it, past the lease duration: renewed, its turn
	// is still node-a's and its status live.
	if ok, _, err := b.r.MayInstall(ctx, "h1"); ok || err != nil {
		t.Fatalf("node-b took the turn node-a renews: %v %v", ok, err)
	}
	if st, err := b.r.Statuses(ctx); err != nil || len(st) != 2 || !st[0].Live {
		t.Fatalf("statuses while node-a renews: %+v %v", st, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.clock.Tickers(0) != 0 {
		t.Fatal("Run left its ticker running")
	}
	c.clock.Step(30*time.Second + time.Second)
	st, err := b.r.Statuses(ctx)
	if err != nil || len(st) != 2 || st[0].Node != "node-a" || st[0].Live {
		t.Fatalf("statuses once node-a stopped renewing: %+v %v", st, err)
	}
}

// waitFor polls cond until it holds, failing the test after a while.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A snapshot held back for the same reason is logged at Info once, then at
// Debug; a new reason, a new snapshot or a turn taken in between log at
// Info again.
func TestHeldBackLoggedOncePerReason(t *testing.T) {
	var buf strings.Builder
	r := &Rollout{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	r.logHeld("d1", "waiting", []any{"waiting_for", "node-a"})
	r.logHeld("d1", "waiting", []any{"waiting_for", "node-a"})
	r.logHeld("d1", "waiting", []any{"waiting_for", "node-b"})
	r.logHeld("d2", "waiting", []any{"waiting_for", "node-b"})
	r.logHeld("", "", nil)
	r.logHeld("d2", "waiting", []any{"waiting_for", "node-b"})
	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		for _, f := range strings.Fields(line) {
			if lv, ok := strings.CutPrefix(f, "level="); ok {
				levels = append(levels, lv)
			}
		}
	}
	want := []string{"INFO", "DEBUG", "INFO", "INFO", "INFO"}
	if !slices.Equal(levels, want) {
		t.Fatalf("levels %v, want %v\n%s", levels, want, buf.String())
	}
}
