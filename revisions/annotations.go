package revisions

// Annotations put on the manifest published by a fallback. The first three
// are read by OpenShift's static-pod operators exactly as spelled; the
// revgate.io/ ones add what an operator needs to act on a fallback.
const (
	// AnnotationFallbackForRevision: the revision that failed, e.g. "5".
	AnnotationFallbackForRevision = "startup-monitor.static-pods.openshift.io/fallback-for-revision"
	// AnnotationFallbackReason: a machine-readable reason (see the Reason* constants).
	AnnotationFallbackReason = "startup-monitor.static-pods.openshift.io/fallback-reason"
	// AnnotationFallbackMessage: a human-readable, possibly multi-line message.
	AnnotationFallbackMessage = "startup-monitor.static-pods.openshift.io/fallback-message"

	// AnnotationFallbackTime: when the fallback happened (RFC 3339).
	AnnotationFallbackTime = "revgate.io/fallback-time"
	// AnnotationFallbackAttempt: which rollout of the failed revision failed (1, 2, ...).
	AnnotationFallbackAttempt = "revgate.io/fallback-attempt"
	// AnnotationNextRetry: when the failed revision is rolled out again (RFC 3339);
	// absent when it is not retried.
	AnnotationNextRetry = "revgate.io/next-retry"
	// AnnotationFallbackToRevision: the revision put back.
	AnnotationFallbackToRevision = "revgate.io/fallback-to-revision"
	// AnnotationInstalledAt: when the installer wrote the revision (RFC 3339),
	// on both the operand and the startup-monitor manifest.
	AnnotationInstalledAt = "revgate.io/installed-at"
)

// Fallback reasons.
const (
	ReasonNeverStartedUp      = "NeverStartedUp"
	ReasonCrashLooping        = "CrashLooping"
	ReasonUnhealthy           = "Unhealthy"
	ReasonNotReady            = "NotReady"
	ReasonDependencyUnhealthy = "DependencyUnhealthy"
)

// Retried reports whether a failure with this reason is retried later.
func Retried(reason string) bool {
	switch reason {
	case ReasonUnhealthy, ReasonNotReady, ReasonDependencyUnhealthy:
		return true
	}
	return false
}

// DependencyCheckPrefix starts the names of readyz checks that test something
// outside the operand (upstream reachability); a revision failing only such
// checks is DependencyUnhealthy rather than NotReady.
const DependencyCheckPrefix = "dependency/"

// Admin response headers that identify which process answered, since during a
// make-before-break replacement two processes may share the admin port.
const (
	HeaderRevision = "X-Revgate-Revision"
	HeaderPID      = "X-Revgate-Pid"
)
