package fallbackstatus

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/revisions"
)

func TestParse(t *testing.T) {
	full := map[string]string{
		revisions.AnnotationFallbackForRevision: "7",
		revisions.AnnotationFallbackReason:      "CrashLooping",
		revisions.AnnotationFallbackMessage:     "line one\nline two",
		revisions.AnnotationFallbackTime:        "2026-11-22T01:02:03Z",
		revisions.AnnotationFallbackAttempt:     "2",
		revisions.AnnotationFallbackToRevision:  "6",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range full {
			m[a] = b
		}
		if v == "<delete>" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		in      map[string]string
		want    *Fallback
		wantErr string
	}{
		{name: "none", in: map[string]string{"other": "x"}, want: nil},
		{name: "nil map", in: nil, want: nil},
		{name: "full", in: full, want: &Fallback{ForRevision: 7, Reason: "CrashLooping", Message: "line one\nline two",
			Time: time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC), Attempt: 2, ToRevision: 6}},
		{name: "openshift only", in: map[string]string{
			revisions.AnnotationFallbackForRevision: "3",
			revisions.AnnotationFallbackReason:      "NeverStartedUp",
		}, want: &Fallback{ForRevision: 3, Reason: "NeverStartedUp"}},
		{name: "bad revision", in: with(revisions.AnnotationFallbackForRevision, "x"), wantErr: "fallback-for-revision"},
		{name: "zero revision", in: with(revisions.AnnotationFallbackForRevision, "0"), wantErr: "fallback-for-revision"},
		{name: "no reason", in: with(revisions.AnnotationFallbackReason, "<delete>"), want: &Fallback{ForRevision: 7, Reason: ReasonUnknown,
			Message: "line one\nline two", Time: time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC), Attempt: 2, ToRevision: 6}},
		{name: "empty reason", in: with(revisions.AnnotationFallbackReason, ""), want: &Fallback{ForRevision: 7, Reason: ReasonUnknown,
			Message: "line one\nline two", Time: time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC), Attempt: 2, ToRevision: 6}},
		// What library-go's startup monitor writes when it has no reason.
		{name: "openshift monitor without reason", in: map[string]string{revisions.AnnotationFallbackForRevision: "4"},
			want: &Fallback{ForRevision: 4, Reason: ReasonUnknown}},
		{name: "bad time", in: with(revisions.AnnotationFallbackTime, "yesterday"), wantErr: "fallback-time"},
		{name: "bad attempt", in: with(revisions.AnnotationFallbackAttempt, "-1"), wantErr: "fallback-attempt"},
		{name: "bad to", in: with(revisions.AnnotationFallbackToRevision, "four"), wantErr: "fallback-to-revision"},
		{name: "bad retry", in: with(revisions.AnnotationNextRetry, "soon"), wantErr: "next-retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrMalformed naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAnnotationsRoundTrip(t *testing.T) {
	next := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	in := &Fallback{ForRevision: 5, Reason: "DependencyUnhealthy", Message: "m", Time: next.Add(-time.Hour), Attempt: 3, ToRevision: 4, NextRetry: &next}
	got, err := Parse(in.Annotations())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip: got %+v, want %+v", got, in)
	}
	if len(in.Annotations()) != len(Keys) {
		t.Fatalf("a full fallback should use every key: %v", in.Annotations())
	}
}

func TestDegradedCondition(t *testing.T) {
	c := DegradedCondition(nil)
	if c.Type != ConditionDegraded || c.Status != metav1.ConditionFalse || c.Reason != ReasonAsExpected {
		t.Fatalf("nil fallback: %+v", c)
	}
	c = DegradedCondition(&Fallback{ForRevision: 9, Reason: "NeverStartedUp", Message: "no start record", ToRevision: 8,
		Time: time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC)})
	if c.Status != metav1.ConditionTrue || c.Reason != "NeverStartedUp" {
		t.Fatalf("fallback: %+v", c)
	}
	for _, want := range []string{"revision 9 failed with NeverStartedUp", "not retried", "no start record"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
}

// A fallback OpenShift's startup monitor wrote (the three OpenShift
// annotations, maybe no reason) reads as a fallback with reason Unknown, and
// is never said not to be retried: revgate cannot know its retries.
func TestFallbackWrittenByOpenShift(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		reason      string
		revgate     bool
		summary     string
	}{
		{
			name: "openshift, all three",
			annotations: map[string]string{
				revisions.AnnotationFallbackForRevision: "5",
				revisions.AnnotationFallbackReason:      "NotReady",
				revisions.AnnotationFallbackMessage:     "etcd post-start hook not finished",
			},
			reason: "NotReady", summary: "revision 5 failed with NotReady, serving the previous revision",
		},
		{
			name:        "openshift, no reason",
			annotations: map[string]string{revisions.AnnotationFallbackForRevision: "5"},
			reason:      ReasonUnknown, summary: "revision 5 failed with Unknown, serving the previous revision",
		},
		{
			name: "revgate, not retried",
			annotations: map[string]string{
				revisions.AnnotationFallbackForRevision: "5",
				revisions.AnnotationFallbackReason:      "CrashLooping",
				revisions.AnnotationFallbackTime:        "2026-11-22T01:02:03Z",
				revisions.AnnotationFallbackAttempt:     "1",
				revisions.AnnotationFallbackToRevision:  "4",
			},
			reason: "CrashLooping", revgate: true, summary: "revision 5 failed with CrashLooping, serving revision 4; not retried",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.annotations)
			if err != nil {
				t.Fatal(err)
			}
			if f.Reason != tc.reason || f.WrittenByRevgate() != tc.revgate || f.Summary() != tc.summary {
				t.Fatalf("reason %q revgate %v summary %q, want %q %v %q", f.Reason, f.WrittenByRevgate(), f.Summary(), tc.reason, tc.revgate, tc.summary)
			}
			if c := DegradedCondition(f); c.Status != metav1.ConditionTrue || c.Reason != tc.reason {
				t.Fatalf("condition %+v", c)
			}
		})
	}
}
