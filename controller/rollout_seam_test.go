package controller

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/revgate/revgate/revisions"
)

// gate is a Rollout that lets installs through once opened and keeps what
// it was asked and told.
type gate struct {
	mu       sync.Mutex
	open     bool
	asked    []string
	digests  []string
	verdicts []Verdict
}

var _ Rollout = (*gate)(nil)

// gateRetry is how soon a held snapshot is asked about again.
const gateRetry = 100 * time.Millisecond

func (g *gate) MayInstall(_ context.Context, digest string) (bool, time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, digest)
	return g.open, gateRetry, nil
}

func (g *gate) Report(_ context.Context, digest string, v Verdict) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.digests = append(g.digests, digest)
	g.verdicts = append(g.verdicts, v)
	return nil
}

func (g *gate) setOpen(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
}

// seen returns the digests asked about and reported on, and the verdicts.
func (g *gate) seen() (asked, reported []string, verdicts []Verdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.asked), slices.Clone(g.digests), slices.Clone(g.verdicts)
}

// setOutcome records the monitor's verdict on revision n, as the monitor
// writes it into the state file.
func (e *env) setOutcome(n int, outcome revisions.Outcome, reason string) {
	e.t.Helper()
	err := revisions.UpdateState(revisions.OS(), e.layout.Defaulted().StateFile(), func(s *revisions.State) error {
		rs := s.Get(n)
		rs.Outcome, rs.Reason = outcome, reason
		if reason != "" {
			rs.Message = "the monitor's message"
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// Two nodes render the same cluster into different folders, pods, ports and
// node names, and ask the rollout about the same snapshot: its digest is of
// the cluster's configuration, never of what a node renders around it (a
// digest of node-local rendering would make every node's snapshot another
// one, and no node would ever wait for a verdict of another). A snapshot
// held back is asked about again after the rollout's delay without any
// change in the cluster; once let through it is installed once; the
// monitor's verdicts are reported with the same digest, once each.
func TestRolloutSeam(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	e.createIngress("web", "web.example", "web")
	a, b := e.node("node-a"), e.node("node-b")
	ga, gb := &gate{}, &gate{}
	a.rollout, b.rollout = ga, gb
	a.startController(c, func(o *Options) {
		o.Render.ProxyArgs = []string{"--http-addr=127.0.0.1:18080", "--admin-addr=127.0.0.1:19901"}
	})
	b.startController(c, func(o *Options) {
		o.Render.Binary = "/opt/revgate/bin/revgate"
		o.Render.ProxyArgs = []string{"--http-addr=127.0.0.1:28080", "--admin-addr=127.0.0.1:29901"}
	})

	var snapshot string
	t.Run("held back and asked again", func(t *testing.T) {
		for _, n := range []struct {
			e *env
			g *gate
		}{{a, ga}, {b, gb}} {
			waitFor(t, waitLong, n.e.opts.NodeName+" asking three times", func() (bool, string) {
				asked, _, _ := n.g.seen()
				return len(asked) >= 3, fmt.Sprint("asked ", asked)
			})
			if revs := n.e.revisions(); len(revs) != 0 {
				t.Fatalf("%s installed %v while the rollout held the snapshot back", n.e.opts.NodeName, revs)
			}
		}
		askedA, _, _ := ga.seen()
		askedB, _, _ := gb.seen()
		snapshot = askedA[0]
		for _, d := range append(askedA, askedB...) {
			if d != snapshot {
				t.Fatalf("node-a asked about %v, node-b about %v: one cluster state, one snapshot", askedA, askedB)
			}
		}
	})

	t.Run("let through, installed once", func(t *testing.T) {
		for _, n := range []*env{a, b} {
			n.in(t).rollout.(*gate).setOpen(true)
		}
		for _, n := range []*env{a, b} {
			n := n.in(t)
			n.waitRevision(1)
			n.settle()
			if revs := n.revisions(); !reflect.DeepEqual(revs, []int{1}) {
				t.Fatalf("%s: revisions %v", n.opts.NodeName, revs)
			}
			got, err := RevisionDigest(n.layout.Defaulted().RevisionDir(1))
			if err != nil {
				t.Fatal(err)
			}
			if got != snapshot {
				t.Fatalf("%s's revision 1 has digest %s, the snapshot asked about %s", n.opts.NodeName, got, snapshot)
			}
		}
		podA, errA := os.ReadFile(a.layout.Defaulted().RevisionPodManifest(1))
		podB, errB := os.ReadFile(b.layout.Defaulted().RevisionPodManifest(1))
		if errA != nil || errB != nil || bytes.Equal(podA, podB) {
			t.Fatalf("the nodes' pods should differ (ports, binary, folders): %v %v", errA, errB)
		}
	})

	t.Run("verdicts reported once, with the snapshot's digest", func(t *testing.T) {
		a, b := a.in(t), b.in(t)
		a.setOutcome(1, revisions.OutcomeGood, "")
		b.setOutcome(1, revisions.OutcomeFailed, revisions.ReasonCrashLooping)
		for _, n := range []struct {
			e    *env
			g    *gate
			want Verdict
		}{
			{a, ga, Verdict{Revision: 1, Outcome: revisions.OutcomeGood, Attempt: 1}},
			{b, gb, Verdict{Revision: 1, Outcome: revisions.OutcomeFailed, Reason: revisions.ReasonCrashLooping, Message: "the monitor's message", Attempt: 1}},
		} {
			waitFor(t, waitLong, n.e.opts.NodeName+"'s verdict", func() (bool, string) {
				_, reported, _ := n.g.seen()
				return len(reported) > 0, ""
			})
			n.e.settle()
			n.e.settle()
			_, reported, verdicts := n.g.seen()
			if !reflect.DeepEqual(reported, []string{snapshot}) || !reflect.DeepEqual(verdicts, []Verdict{n.want}) {
				t.Fatalf("%s reported %v %+v, want %s %+v once", n.e.opts.NodeName, reported, verdicts, snapshot, n.want)
			}
		}
	})
}
