// Package fallbackstatus reads the fallback annotations that revgate's
// startup monitor puts on a static pod's manifest (and that the kubelet
// copies onto the mirror pod) into a typed value, and derives the Degraded
// condition an operator reports from it.
//
// The annotations are OpenShift's three
// startup-monitor.static-pods.openshift.io/fallback-{for-revision,reason,message}
// plus revgate's revgate.io/fallback-{time,attempt,to-revision} and
// revgate.io/next-retry. A pod without fallback-for-revision carries no
// fallback. A fallback written by OpenShift's own startup monitor (library-go)
// carries only the three OpenShift annotations, possibly without a reason;
// Parse reads it too, and its reason as Unknown, as OpenShift's operators
// report it. The package has no dependency beyond the annotation keys and
// apimachinery's Condition type, so operators can import it cheaply.
package fallbackstatus

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/revisions"
)

// ConditionDegraded is the condition type derived from a fallback.
const ConditionDegraded = "Degraded"

// Condition reasons used when no fallback is in effect.
const (
	// ReasonAsExpected: no fallback is in effect.
	ReasonAsExpected = "AsExpected"
)

// ReasonUnknown is the reason of a fallback whose fallback-reason annotation
// is missing or empty, as OpenShift's static-pod operators report it.
const ReasonUnknown = "Unknown"

// ErrMalformed is wrapped by every error of Parse.
var ErrMalformed = errors.New("malformed fallback annotation")

// Fallback is a fallback in effect on a pod: revision ForRevision failed and
// revision ToRevision is served instead.
type Fallback struct {
	// ForRevision is the revision that failed; always set.
	ForRevision int `json:"forRevision"`
	// Reason is machine-readable (NeverStartedUp, CrashLooping, Unhealthy,
	// NotReady, DependencyUnhealthy); ReasonUnknown when not given.
	Reason string `json:"reason"`
	// Message is for humans, possibly multi-line.
	Message string `json:"message"`
	// Time of the fallback; zero when the annotation is absent.
	Time time.Time `json:"time,omitzero"`
	// Attempt of the failed revision that failed (1 for the first rollout);
	// 0 when absent.
	Attempt int `json:"attempt,omitempty"`
	// NextRetry is when the failed revision is rolled out again; nil when it
	// is not retried.
	NextRetry *time.Time `json:"nextRetry,omitempty"`
	// ToRevision is the revision put back; 0 when absent.
	ToRevision int `json:"toRevision,omitempty"`
}

// Parse reads the fallback annotations. It returns nil and no error when the
// pod carries no fallback (no fallback-for-revision annotation), and an error
// wrapping ErrMalformed naming the first annotation that does not parse.
func Parse(annotations map[string]string) (*Fallback, error) {
	raw, ok := annotations[revisions.AnnotationFallbackForRevision]
	if !ok {
		return nil, nil
	}
	f := &Fallback{
		Reason:  annotations[revisions.AnnotationFallbackReason],
		Message: annotations[revisions.AnnotationFallbackMessage],
	}
	var err error
	if f.ForRevision, err = positive(revisions.AnnotationFallbackForRevision, raw); err != nil {
		return nil, err
	}
	if f.Reason == "" {
		f.Reason = ReasonUnknown
	}
	if v, ok := annotations[revisions.AnnotationFallbackAttempt]; ok {
		if f.Attempt, err = positive(revisions.AnnotationFallbackAttempt, v); err != nil {
			return nil, err
		}
	}
	if v, ok := annotations[revisions.AnnotationFallbackToRevision]; ok {
		if f.ToRevision, err = positive(revisions.AnnotationFallbackToRevision, v); err != nil {
			return nil, err
		}
	}
	if v, ok := annotations[revisions.AnnotationFallbackTime]; ok {
		if f.Time, err = timestamp(revisions.AnnotationFallbackTime, v); err != nil {
			return nil, err
		}
	}
	if v, ok := annotations[revisions.AnnotationNextRetry]; ok {
		t, err := timestamp(revisions.AnnotationNextRetry, v)
		if err != nil {
			return nil, err
		}
		f.NextRetry = &t
	}
	return f, nil
}

func positive(key, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: %s=%q is not a positive integer", ErrMalformed, key, v)
	}
	return n, nil
}

func timestamp(key, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s=%q is not an RFC 3339 time", ErrMalformed, key, v)
	}
	return t, nil
}

// Annotations renders f as the annotations Parse reads; absent optional
// values are left out. It is what the startup monitor writes.
func (f *Fallback) Annotations() map[string]string {
	a := map[string]string{
		revisions.AnnotationFallbackForRevision: strconv.Itoa(f.ForRevision),
		revisions.AnnotationFallbackReason:      f.Reason,
		revisions.AnnotationFallbackMessage:     f.Message,
	}
	if !f.Time.IsZero() {
		a[revisions.AnnotationFallbackTime] = f.Time.UTC().Format(time.RFC3339)
	}
	if f.Attempt > 0 {
		a[revisions.AnnotationFallbackAttempt] = strconv.Itoa(f.Attempt)
	}
	if f.ToRevision > 0 {
		a[revisions.AnnotationFallbackToRevision] = strconv.Itoa(f.ToRevision)
	}
	if f.NextRetry != nil {
		a[revisions.AnnotationNextRetry] = f.NextRetry.UTC().Format(time.RFC3339)
	}
	return a
}

// Keys are every annotation key of a fallback, for removing them.
var Keys = []string{
	revisions.AnnotationFallbackForRevision,
	revisions.AnnotationFallbackReason,
	revisions.AnnotationFallbackMessage,
	revisions.AnnotationFallbackTime,
	revisions.AnnotationFallbackAttempt,
	revisions.AnnotationFallbackToRevision,
	revisions.AnnotationNextRetry,
}

// WrittenByRevgate reports whether revgate's startup monitor wrote the
// fallback: it always adds its revgate.io/ annotations, which OpenShift's
// startup monitor does not. Only then does a missing next-retry mean that the
// failed revision is not retried.
func (f *Fallback) WrittenByRevgate() bool {
	return !f.Time.IsZero() || f.Attempt > 0 || f.ToRevision > 0 || f.NextRetry != nil
}

// Summary is one line for humans, e.g. "revision 5 failed with NotReady,
// serving revision 4; retry at 2026-11-22T01:00:00Z". Of a fallback revgate
// did not write, it says nothing of retries: it cannot know them.
func (f *Fallback) Summary() string {
	s := fmt.Sprintf("revision %d failed with %s", f.ForRevision, f.Reason)
	if f.Attempt > 1 {
		s += fmt.Sprintf(" (attempt %d)", f.Attempt)
	}
	if f.ToRevision > 0 {
		s += fmt.Sprintf(", serving revision %d", f.ToRevision)
	} else {
		s += ", serving the previous revision"
	}
	switch {
	case f.NextRetry != nil:
		s += "; retry at " + f.NextRetry.UTC().Format(time.RFC3339)
	case f.WrittenByRevgate():
		s += "; not retried"
	}
	return s
}

// DegradedCondition derives the Degraded condition: Status True with the
// fallback's reason and a message of its summary and message when f is a
// fallback in effect, Status False with reason AsExpected when f is nil.
// LastTransitionTime is the fallback time (zero when f is nil or has none);
// ObservedGeneration is left to the caller.
func DegradedCondition(f *Fallback) metav1.Condition {
	if f == nil {
		return metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected,
			Message: "no fallback in effect"}
	}
	msg := f.Summary()
	if f.Message != "" {
		msg += ": " + f.Message
	}
	return metav1.Condition{
		Type:               ConditionDegraded,
		Status:             metav1.ConditionTrue,
		Reason:             f.Reason,
		Message:            msg,
		LastTransitionTime: metav1.NewTime(f.Time),
	}
}
