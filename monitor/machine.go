package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/revgate/revgate/revisions"
)

// The monitor's decision is a small state machine. Every step looks once at
// the files (and, while watching, at the operand): the look turns what it
// finds into an input for the current state; transitions names the next
// state and the action; the action writes (always under the lock) and may
// report its outcome as the next input, taken in the same step. The whole
// table is spelt out in TestTransitions.

// state is where the monitor stands with its revision.
type state int

const (
	// stateStart: nothing read yet. The state file says where to begin, so
	// that a restarted monitor neither repeats a decision nor resets a
	// retry schedule.
	stateStart state = iota
	// stateWaiting: the published operand manifest is another revision's,
	// or there is none. The monitor waits and never falls back.
	stateWaiting
	// stateWatching: this revision's rollout runs. The checks run against
	// the fallback timeout, which started when the monitor first saw the
	// manifest published.
	stateWatching
	// stateRetryPending: the rollout failed for a reason that is retried.
	// The fallback serves until the retry is due.
	stateRetryPending
	// stateFailed: the rollout failed for a reason that is not retried. The
	// fallback is completed and the monitor leaves.
	stateFailed
	// stateDone: nothing left to do; Run returns.
	stateDone
	numStates
)

var stateNames = [numStates]string{"Start", "Waiting", "Watching", "RetryPending", "Failed", "Done"}

func (s state) String() string { return nameOf(s, stateNames[:], "state") }

// nameOf is the name of enum value v in names, or kind(v) when it has none.
func nameOf[T ~int](v T, names []string, kind string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, int(v))
}

// input is what a look found, or what an action reports it did.
type input int

const (
	// inSuperseded: a newer revision is installed or published. Every state
	// but Done looks for it first.
	inSuperseded input = iota

	// What the state file records of this revision (looked at in Start;
	// also the outcomes of the decisions taken in Watching).

	// inRecordedGood: recorded good, and last-known-good points at it.
	inRecordedGood
	// inRecordedRetry: recorded failed, with a retry pending.
	inRecordedRetry
	// inRecordedFailed: recorded failed, not to be retried.
	inRecordedFailed
	// inNothingRecorded: nothing that decides (no record, a rollout under
	// way, or good while last-known-good points elsewhere).
	inNothingRecorded

	// What the published operand manifest is (Waiting, Watching; also the
	// outcome of a decision that found it changed under the lock).

	// inOtherPublished: another revision's manifest, or none.
	inOtherPublished
	// inOwnPublished: this revision's manifest (Waiting).
	inOwnPublished

	// What the checks say in Watching, this revision's manifest published.

	// inPassed: the checks pass, fewer than ReadySuccesses times in a row.
	inPassed
	// inReady: the checks passed ReadySuccesses times in a row.
	inReady
	// inNotYet: a check fails before the fallback timeout, not CrashLooping.
	inNotYet
	// inFailing: a check fails at the fallback timeout, or CrashLooping
	// (which is decided at once).
	inFailing
	// inForeign: only another revision's process answered, before the
	// timeout; it says nothing about this revision.
	inForeign
	// inForeignAtTimeout: only another revision's process answered at the
	// timeout; the failure takes the reason this revision last gave.
	inForeignAtTimeout

	// What the time and the published manifest say in RetryPending.

	// inRetryWaiting: the retry is not due and the fallback is in place.
	inRetryWaiting
	// inFallbackMissing: the retry is not due and this revision (or
	// nothing) is published: a crash or a failed write interrupted the
	// fallback.
	inFallbackMissing
	// inRetryDue: the retry time has come.
	inRetryDue
	// inRetryStarted: this revision is published again and its rollout
	// began (the outcome of starting the retry).
	inRetryStarted

	// inTick: a step that found nothing newer (Failed has nothing else to
	// look at).
	inTick
	numInputs
)

var inputNames = [numInputs]string{
	"Superseded",
	"RecordedGood", "RecordedRetry", "RecordedFailed", "NothingRecorded",
	"OtherPublished", "OwnPublished",
	"Passed", "Ready", "NotYet", "Failing", "Foreign", "ForeignAtTimeout",
	"RetryWaiting", "FallbackMissing", "RetryDue", "RetryStarted",
	"Tick",
}

func (i input) String() string { return nameOf(i, inputNames[:], "input") }

// action is what a transition does. Every action that writes takes the
// lock; the decisions check again under it that the published operand
// manifest is still this revision's.
type action int

const (
	// actNone writes nothing.
	actNone action = iota
	// actLeave cancels a pending retry of this revision and removes the
	// published monitor manifest when it is this revision's.
	actLeave
	// actCompleteGood finishes a good decision a restart interrupted:
	// removes the replaced slot and the own monitor manifest.
	actCompleteGood
	// actResumeRetry takes the retry time recorded in the state file.
	actResumeRetry
	// actAwaitRetry takes the retry time of the failure just recorded.
	actAwaitRetry
	// actBeginRollout notes when the rollout started: the fallback
	// timeout runs from now, start records count from the manifest's time.
	actBeginRollout
	// actForgetRollout forgets the rollout: the timeout starts again when
	// this revision is published again.
	actForgetRollout
	// actDecideGood points last-known-good at this revision, records it,
	// removes the replaced slot and the own monitor manifest. Outcome:
	// RecordedGood, or Superseded / OtherPublished when the manifest
	// changed before the decision.
	actDecideGood
	// actFallBack records the failure, puts the fallback in place and
	// schedules a retry for a retried reason. Outcome: RecordedRetry or
	// RecordedFailed (even when putting the fallback in place failed after
	// the record), or Superseded / OtherPublished.
	actFallBack
	// actRepublishFallback puts the recorded fallback back in place.
	actRepublishFallback
	// actStartRetry publishes this revision again and begins its rollout.
	// Outcome: RetryStarted, or Superseded.
	actStartRetry
	// actFinish completes the fallback when it is not in place and removes
	// the own monitor manifest.
	actFinish
	numActions
)

var actionNames = [numActions]string{
	"-", "Leave", "CompleteGood", "ResumeRetry", "AwaitRetry", "BeginRollout", "ForgetRollout",
	"DecideGood", "FallBack", "RepublishFallback", "StartRetry", "Finish",
}

func (a action) String() string { return nameOf(a, actionNames[:], "action") }

// then says how the step goes on after a transition.
type then int

const (
	// stop ends the step; the next look comes at the next probe interval
	// or file change.
	stop then = iota
	// goOn goes on in the same step: with the outcome the action reported,
	// else with a new look (at the files as this step first read them).
	goOn
)

func (t then) String() string {
	if t == goOn {
		return "go on"
	}
	return "stop"
}

// transition is one row of the table.
type transition struct {
	next   state
	action action
	then   then
}

// transitions is the monitor's whole decision. A state × input missing here
// cannot happen: the look of a state never yields it, and no action of the
// state reports it.
var transitions = [numStates]map[input]transition{
	stateStart: {
		inSuperseded:      {stateDone, actLeave, stop},
		inRecordedGood:    {stateDone, actCompleteGood, stop},
		inRecordedRetry:   {stateRetryPending, actResumeRetry, goOn},
		inRecordedFailed:  {stateFailed, actNone, goOn},
		inNothingRecorded: {stateWaiting, actNone, goOn},
	},
	stateWaiting: {
		inSuperseded:     {stateDone, actLeave, stop},
		inOtherPublished: {stateWaiting, actNone, stop},
		inOwnPublished:   {stateWatching, actBeginRollout, goOn},
	},
	stateWatching: {
		inSuperseded:       {stateDone, actLeave, stop},
		inOtherPublished:   {stateWaiting, actForgetRollout, stop},
		inPassed:           {stateWatching, actNone, stop},
		inNotYet:           {stateWatching, actNone, stop},
		inForeign:          {stateWatching, actNone, stop},
		inReady:            {stateWatching, actDecideGood, goOn},
		inFailing:          {stateWatching, actFallBack, goOn},
		inForeignAtTimeout: {stateWatching, actFallBack, goOn},
		inRecordedGood:     {stateDone, actNone, stop},
		inRecordedRetry:    {stateRetryPending, actAwaitRetry, stop},
		inRecordedFailed:   {stateFailed, actNone, goOn},
	},
	stateRetryPending: {
		inSuperseded:      {stateDone, actLeave, stop},
		inRetryWaiting:    {stateRetryPending, actNone, stop},
		inFallbackMissing: {stateRetryPending, actRepublishFallback, stop},
		inRetryDue:        {stateRetryPending, actStartRetry, goOn},
		inRetryStarted:    {stateWatching, actNone, stop},
	},
	stateFailed: {
		inSuperseded: {stateDone, actLeave, stop},
		inTick:       {stateDone, actFinish, stop},
	},
}

// next is the transition of state s on input in; ok is false when the
// table has none.
func next(s state, in input) (t transition, ok bool) {
	if s < 0 || s >= numStates {
		return transition{}, false
	}
	t, ok = transitions[s][in]
	return t, ok
}

// verdict is an input with what its action needs to know.
type verdict struct {
	in input
	// obs is the look at the files the input comes from.
	obs observation
	// reason and message of the failing check (NotYet, Failing,
	// ForeignAtTimeout).
	reason, message string
	// retryAt and attempt of a recorded retry (RecordedRetry).
	retryAt time.Time
	attempt int
}

// maxTransitions bounds the transitions of one step. The longest chain
// (Start, Waiting, Watching, a fallback recorded, Failed, Done) has five.
const maxTransitions = 8

// Step looks once at the files and the operand and takes at most one
// decision. done means the monitor has nothing left to do and exits.
//
// An action that fails ends the step with its error and leaves the state as
// it was, unless it reports an outcome too (a failure recorded, then putting
// the fallback in place failed): the outcome's transition is taken then,
// for the state file drives the monitor from the record on, and the step
// ends with the error.
func (m *Monitor) Step(ctx context.Context) (done bool, err error) {
	if m.state == stateDone {
		return true, nil
	}
	obs, err := m.observe()
	if err != nil {
		return false, err
	}
	var (
		outcome *verdict
		failed  error // an action's error whose outcome is being taken
	)
	for range maxTransitions {
		var v verdict
		if outcome != nil {
			v = *outcome
		} else if v, err = m.look(ctx, obs); err != nil {
			return false, err
		}
		t, ok := next(m.state, v.in)
		if !ok {
			return false, fmt.Errorf("monitor: no transition from %s on %s", m.state, v.in)
		}
		out, err := m.do(ctx, t.action, v)
		if err != nil && out == nil {
			return false, errors.Join(failed, err)
		}
		if t.next != m.state {
			m.log.Debug("monitor state", "from", m.state, "input", v.in, "to", t.next, "action", t.action)
		}
		m.state = t.next
		switch {
		case err != nil:
			failed = err
		case failed != nil:
			return false, failed
		case t.then == stop || m.state == stateDone:
			return m.state == stateDone, nil
		}
		outcome = out
	}
	return false, fmt.Errorf("monitor: more than %d transitions in one step (in %s)", maxTransitions, m.state)
}

// look turns what the files (and in Watching the operand) say into the
// input of the current state. It writes nothing.
func (m *Monitor) look(ctx context.Context, obs observation) (verdict, error) {
	v := verdict{obs: obs}
	if obs.superseded() {
		v.in = inSuperseded
		return v, nil
	}
	n := m.opts.Revision
	switch m.state {
	case stateStart:
		return m.lookAtRecord(v)
	case stateWaiting:
		v.in = inOtherPublished
		if obs.published == n {
			v.in = inOwnPublished
		}
	case stateWatching:
		if obs.published != n {
			v.in = inOtherPublished
			return v, nil
		}
		return m.lookAtChecks(ctx, v), nil
	case stateRetryPending:
		switch {
		case !m.opts.Clock.Now().Before(m.nextRetry):
			v.in = inRetryDue
		case obs.published == n || obs.published == 0:
			v.in = inFallbackMissing
		default:
			v.in = inRetryWaiting
		}
	case stateFailed:
		v.in = inTick
	default:
		return v, fmt.Errorf("monitor: nothing to look at in state %s", m.state)
	}
	return v, nil
}

// lookAtRecord reads what the state file says about this revision.
func (m *Monitor) lookAtRecord(v verdict) (verdict, error) {
	v.in = inNothingRecorded
	st, err := revisions.LoadState(m.fs, m.opts.Layout.StateFile())
	if err != nil {
		return v, err
	}
	rs, ok := st.Revisions[m.opts.Revision]
	switch {
	case !ok:
	case rs.Outcome == revisions.OutcomeGood:
		if lkg, err := m.opts.Layout.LastKnownGood(m.fs); err == nil && lkg == m.opts.Revision {
			v.in = inRecordedGood
		}
	case rs.Outcome == revisions.OutcomeFailed && rs.NextRetry != nil:
		v.in, v.retryAt, v.attempt = inRecordedRetry, *rs.NextRetry, rs.Attempts
	case rs.Outcome == revisions.OutcomeFailed:
		v.in = inRecordedFailed
	}
	return v, nil
}

// lookAtChecks runs the checks of the rollout and keeps the count of
// passes in a row and the reason this revision last gave.
func (m *Monitor) lookAtChecks(ctx context.Context, v verdict) verdict {
	final := !m.opts.Clock.Now().Before(m.seenAt.Add(m.opts.FallbackTimeout))
	checks := []Check{m.terminationCheck(m.rolloutStart, final), m.healthzCheck(), m.readyzCheck()}
	if m.hasMirrorPods() {
		checks = append(checks, m.mirrorPodCheck())
	}
	ok, reason, message, err := runChecks(ctx, checks...)
	if errors.Is(err, errInconclusive) {
		// Another revision's process answered every attempt: this says
		// nothing about ours, so neither count it nor let it name the
		// failure; decide on what was last learnt about this revision.
		if !final {
			v.in = inForeign
			return v
		}
		if m.lastReason != "" {
			reason, message = m.lastReason, m.lastMessage
		}
		v.in, v.reason, v.message = inForeignAtTimeout, reason, message
		return v
	}
	if err != nil {
		m.log.Warn("check failed to run", "reason", reason, "err", err)
	}
	if ok {
		m.streak++
		m.lastReason = ""
		v.in = inPassed
		if m.streak >= m.opts.ReadySuccesses {
			v.in = inReady
		}
		return v
	}
	m.streak = 0
	if reason != m.lastReason {
		m.log.Info("revision not ready yet", "reason", reason, "message", message)
	}
	m.lastReason, m.lastMessage = reason, message
	v.in, v.reason, v.message = inNotYet, reason, message
	if final || reason == revisions.ReasonCrashLooping {
		v.in = inFailing
	}
	return v
}

// do runs action a for verdict v and returns the outcome it reports, if any.
func (m *Monitor) do(ctx context.Context, a action, v verdict) (*verdict, error) {
	switch a {
	case actNone:
		return nil, nil
	case actLeave:
		return nil, m.leave(ctx, v.obs)
	case actCompleteGood:
		return nil, m.completeGood(ctx)
	case actResumeRetry:
		m.nextRetry = v.retryAt
		m.log.Info("resuming a pending retry", "next_retry", m.nextRetry, "attempt", v.attempt)
		return nil, nil
	case actAwaitRetry:
		m.nextRetry = v.retryAt
		return nil, nil
	case actBeginRollout:
		return nil, m.beginRollout(v.obs)
	case actForgetRollout:
		m.log.Info("operand manifest is no longer this revision; waiting", "published", v.obs.published)
		m.seenAt, m.streak = time.Time{}, 0
		return nil, nil
	case actDecideGood:
		return m.good(ctx)
	case actFallBack:
		return m.fail(ctx, v.reason, v.message)
	case actRepublishFallback:
		return nil, m.withLock(ctx, func() error { return m.publishFallback(ctx, false) })
	case actStartRetry:
		return m.startRetry(ctx)
	case actFinish:
		return nil, m.finishFailed(ctx)
	}
	return nil, fmt.Errorf("monitor: unknown action %s", a)
}
