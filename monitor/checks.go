package monitor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/revgate/revgate/revisions"
)

// Check is one readiness check of a revision. It returns ok when the check
// passes; otherwise reason is one of the revisions.Reason* constants and
// message says why for a human. err reports a failure of the check itself
// (the answer is then not ok, with reason and message filled in too).
type Check func(ctx context.Context) (ok bool, reason, message string, err error)

// runChecks runs checks in order; the first one that does not pass names the
// reason.
func runChecks(ctx context.Context, checks ...Check) (ok bool, reason, message string, err error) {
	for _, c := range checks {
		ok, reason, message, err = c(ctx)
		if !ok {
			return false, reason, message, err
		}
	}
	return true, "", "", nil
}

// clockSkew is how much earlier than the publish of the operand manifest a
// start record may be stamped and still count for the rollout: file times
// and the operand's clock are both the host clock, but not read at the same
// instant.
const clockSkew = time.Second

// terminationCheck reads the termination log and counts the start records of
// this revision written since the rollout started. Before the timeout it
// fails only on no start yet (NeverStartedUp) or on crashloopThreshold starts
// (CrashLooping, decided at once); at the timeout (final) more than one start
// is CrashLooping too.
func (m *Monitor) terminationCheck(since time.Time, final bool) Check {
	return func(context.Context) (bool, string, string, error) {
		recs, err := revisions.ReadTerminationRecords(m.opts.Layout.TerminationLog)
		if err != nil {
			return false, revisions.ReasonNeverStartedUp, fmt.Sprintf("cannot read the termination log: %v", err), err
		}
		starts := 0
		var lastExit *revisions.TerminationRecord
		for i := range recs {
			r := &recs[i]
			if r.Revision != m.opts.Revision || r.Time.Before(since.Add(-clockSkew)) {
				continue
			}
			switch r.Type {
			case revisions.RecordStart:
				starts++
			case revisions.RecordExit:
				lastExit = r
			}
		}
		n := m.opts.Revision
		switch {
		case starts == 0:
			return false, revisions.ReasonNeverStartedUp, fmt.Sprintf("revision %d has not started: no start record in %s since %s",
				n, m.opts.Layout.TerminationLog, since.UTC().Format(time.RFC3339)), nil
		case starts >= m.opts.CrashloopThreshold || (final && starts > 1):
			msg := fmt.Sprintf("revision %d started %d times since %s", n, starts, since.UTC().Format(time.RFC3339))
			if lastExit != nil {
				msg += fmt.Sprintf("; last exit (code %d, pid %d): %s", lastExit.ExitCode, lastExit.PID, lastExit.Error)
			}
			return false, revisions.ReasonCrashLooping, msg, nil
		}
		return true, "", "", nil
	}
}

// probeAttempts bounds how often one check asks again when another revision
// answered. With two processes sharing the admin port each attempt reaches
// ours about half the time.
const probeAttempts = 8

// errInconclusive marks a check that learnt nothing about this revision: only
// another revision's process answered. The monitor then keeps what it knew.
var errInconclusive = errors.New("only another revision answered")

// probeOwn asks url until an answer of this revision comes; answers of other
// revisions (a process being replaced beside ours) do not count.
func (m *Monitor) probeOwn(ctx context.Context, u string) (Answer, string, error) {
	var other Answer
	for i := 0; i < probeAttempts; i++ {
		a, err := m.opts.Prober.Probe(ctx, u)
		if err != nil {
			return Answer{}, "", err
		}
		if a.Revision == m.opts.Revision {
			return a, "", nil
		}
		other = a
	}
	if other.Revision == 0 {
		return Answer{}, fmt.Sprintf("%s answered without a %s header", u, revisions.HeaderRevision), nil
	}
	return Answer{}, fmt.Sprintf("%s answered by revision %d (pid %d), not by revision %d", u, other.Revision, other.PID, m.opts.Revision), nil
}

// healthzCheck fails with Unhealthy while /healthz is red or unreachable.
func (m *Monitor) healthzCheck() Check {
	return func(ctx context.Context) (bool, string, string, error) {
		a, foreign, err := m.probeOwn(ctx, m.opts.HealthzURL)
		switch {
		case err != nil:
			return false, revisions.ReasonUnhealthy, fmt.Sprintf("%s unreachable: %v", m.opts.HealthzURL, err), nil
		case foreign != "":
			return false, revisions.ReasonUnhealthy, foreign, errInconclusive
		case a.StatusCode != 200:
			return false, revisions.ReasonUnhealthy, fmt.Sprintf("%s answered %d: %s", m.opts.HealthzURL, a.StatusCode, shorten(a.Body)), nil
		}
		return true, "", "", nil
	}
}

// readyzCheck fails with NotReady while /readyz?verbose is red, naming the
// failing checks; with DependencyUnhealthy when each of them is a dependency
// check.
func (m *Monitor) readyzCheck() Check {
	u := verboseURL(m.opts.ReadyzURL)
	return func(ctx context.Context) (bool, string, string, error) {
		a, foreign, err := m.probeOwn(ctx, u)
		switch {
		case err != nil:
			return false, revisions.ReasonNotReady, fmt.Sprintf("%s unreachable: %v", u, err), nil
		case foreign != "":
			return false, revisions.ReasonNotReady, foreign, errInconclusive
		case a.StatusCode == 200:
			return true, "", "", nil
		}
		names, lines := failedChecks(a.Body)
		if len(names) == 0 {
			return false, revisions.ReasonNotReady, fmt.Sprintf("%s answered %d: %s", u, a.StatusCode, shorten(a.Body)), nil
		}
		msg := fmt.Sprintf("readyz checks failing: %s", strings.Join(lines, "; "))
		if allDependencies(names) {
			return false, revisions.ReasonDependencyUnhealthy, msg, nil
		}
		return false, revisions.ReasonNotReady, msg, nil
	}
}

// mirrorPodCheck fails with NotReady until the mirror pod exists, carries
// this revision's label and is Ready.
func (m *Monitor) mirrorPodCheck() Check {
	return func(ctx context.Context) (bool, string, string, error) {
		pod, err := m.mirrorPod(ctx)
		if err != nil {
			return false, revisions.ReasonNotReady, fmt.Sprintf("mirror pod: %v", err), nil
		}
		name := pod.Namespace + "/" + pod.Name
		if got := pod.Labels[revisions.RevisionLabel]; got != fmt.Sprint(m.opts.Revision) {
			return false, revisions.ReasonNotReady, fmt.Sprintf("mirror pod %s has revision %q, want %d", name, got, m.opts.Revision), nil
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				if c.Status == corev1.ConditionTrue {
					return true, "", "", nil
				}
				return false, revisions.ReasonNotReady, fmt.Sprintf("mirror pod %s is not Ready: %s %s", name, c.Reason, c.Message), nil
			}
		}
		return false, revisions.ReasonNotReady, fmt.Sprintf("mirror pod %s has no Ready condition yet", name), nil
	}
}

func verboseURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Query().Has("verbose") {
		return raw
	}
	if u.RawQuery == "" {
		u.RawQuery = "verbose"
	} else {
		u.RawQuery += "&verbose"
	}
	return u.String()
}

func shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}
