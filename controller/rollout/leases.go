package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names, labels and annotations of the rollout's Leases: a public contract,
// read by operators with kubectl.
const (
	// TargetLabel is on every node's status Lease, with the target's name.
	TargetLabel = "revgate.io/rollout-target"
	// leasePrefix starts every Lease name.
	leasePrefix = "revgate-rollout."
	// maxNameLength is the longest object name the API server takes.
	maxNameLength = 253

	// AnnotationDigest is the digest of the snapshot the node installed last
	// (on a node's status), or the one being rolled out (on the turn).
	AnnotationDigest = "rollout.revgate.io/digest"
	// AnnotationRevision is the node's revision that holds the snapshot.
	AnnotationRevision = "rollout.revgate.io/revision"
	// AnnotationVerdict is Installing, Good or Failed.
	AnnotationVerdict = "rollout.revgate.io/verdict"
	// AnnotationReason and AnnotationMessage say why a revision failed.
	AnnotationReason  = "rollout.revgate.io/reason"
	AnnotationMessage = "rollout.revgate.io/message"
	// AnnotationAttempt is the monitor's attempt the verdict is about.
	AnnotationAttempt = "rollout.revgate.io/attempt"
	// AnnotationTime is when the verdict was written (RFC 3339).
	AnnotationTime = "rollout.revgate.io/time"
)

// Verdicts a node publishes about the snapshot it installed last.
const (
	// VerdictInstalling: the node took its turn and installs the snapshot;
	// its monitor has not decided yet.
	VerdictInstalling = "Installing"
	// VerdictGood: the node's monitor judged the revision good.
	VerdictGood = "Good"
	// VerdictFailed: the node's monitor fell back from the revision.
	VerdictFailed = "Failed"
)

// TurnLeaseName is the name of the target's turn Lease.
func TurnLeaseName(target string) string { return leasePrefix + target }

// StatusLeaseName is the name of a node's status Lease for the target. A
// name too long for the API server ends in a hash of the node's name; the
// node's name itself is the Lease's holderIdentity.
func StatusLeaseName(target, node string) string {
	name := leasePrefix + target + "." + node
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	return leasePrefix + target + "." + hex.EncodeToString(sum[:16])
}

// Status is what a node publishes about its part in the rollout.
type Status struct {
	// Node is the node's name.
	Node string `json:"node"`
	// Digest of the snapshot the node installed last; empty before its
	// first turn.
	Digest string `json:"digest,omitempty"`
	// Revision that holds the snapshot on the node; 0 while installing.
	Revision int `json:"revision,omitempty"`
	// Verdict is VerdictInstalling, VerdictGood or VerdictFailed.
	Verdict string `json:"verdict,omitempty"`
	// Reason and Message of a failure.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Attempt of the monitor the verdict is about.
	Attempt int `json:"attempt,omitempty"`
	// Time the verdict was written.
	Time time.Time `json:"time,omitzero"`
	// Renewed is when the node last renewed its Lease.
	Renewed time.Time `json:"renewed,omitzero"`
	// Joined is when the node first published its status.
	Joined time.Time `json:"joined,omitzero"`
	// Live reports whether the Lease was renewed within its duration.
	Live bool `json:"live"`
}

// statusOf reads a status Lease; now decides whether it is live.
func statusOf(l *coordinationv1.Lease, now time.Time) Status {
	a := l.Annotations
	s := Status{Digest: a[AnnotationDigest], Verdict: a[AnnotationVerdict], Reason: a[AnnotationReason], Message: a[AnnotationMessage]}
	if l.Spec.HolderIdentity != nil {
		s.Node = *l.Spec.HolderIdentity
	}
	s.Revision, _ = strconv.Atoi(a[AnnotationRevision])
	s.Attempt, _ = strconv.Atoi(a[AnnotationAttempt])
	s.Time, _ = time.Parse(time.RFC3339, a[AnnotationTime])
	s.Live = live(l, now)
	if l.Spec.RenewTime != nil {
		s.Renewed = l.Spec.RenewTime.Time
	}
	if l.Spec.AcquireTime != nil {
		s.Joined = l.Spec.AcquireTime.Time
	}
	return s
}

// annotate writes s's verdict fields into a Lease's annotations.
func (s Status) annotate(a map[string]string) {
	set := func(k, v string) {
		if v == "" {
			delete(a, k)
			return
		}
		a[k] = v
	}
	itoa := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	set(AnnotationDigest, s.Digest)
	set(AnnotationRevision, itoa(s.Revision))
	set(AnnotationVerdict, s.Verdict)
	set(AnnotationReason, s.Reason)
	set(AnnotationMessage, s.Message)
	set(AnnotationAttempt, itoa(s.Attempt))
	if s.Time.IsZero() {
		delete(a, AnnotationTime)
	} else {
		a[AnnotationTime] = s.Time.UTC().Format(time.RFC3339)
	}
}

// holder is a Lease's holderIdentity, "" when none.
func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// live reports whether a Lease was renewed within its duration.
func live(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// renew makes node the Lease's holder as of now, for d.
func renew(l *coordinationv1.Lease, node string, now time.Time, d time.Duration) {
	if holder(l) != node {
		t := metav1.NewMicroTime(now)
		l.Spec.AcquireTime = &t
		if l.Spec.LeaseTransitions == nil {
			l.Spec.LeaseTransitions = new(int32)
		}
		*l.Spec.LeaseTransitions++
	}
	l.Spec.HolderIdentity = &node
	secs := int32(d / time.Second)
	l.Spec.LeaseDurationSeconds = &secs
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
}
