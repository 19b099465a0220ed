package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/controller"
	"github.com/revgate/revgate/revisions"
)

// Defaults of Options.
const (
	DefaultNamespace      = "kube-system"
	DefaultLeaseDuration  = 40 * time.Second
	DefaultPoll           = 5 * time.Second
	DefaultStoppedRecheck = time.Minute
	// minLeaseDuration leaves a renewal period (a third) of a second at least.
	minLeaseDuration = 3 * time.Second
)

// Event reasons, recorded on the turn Lease.
const (
	// EventNodeInstalling: a node took its turn and installs a snapshot.
	EventNodeInstalling = "RolloutNodeInstalling"
	// EventNodeGood: a node's monitor judged the snapshot's revision good;
	// the next node may take its turn.
	EventNodeGood = "RolloutNodeGood"
	// EventStopped: a node's monitor fell back from the snapshot's revision;
	// no other node installs the snapshot.
	EventStopped = "RolloutStopped"
)

// Options configure one node's part in the rollouts of a target. Zero
// values take the defaults named.
type Options struct {
	// Client reaches the API server (required).
	Client kubernetes.Interface
	// Namespace holds the Leases and Events; default kube-system.
	Namespace string
	// Target is the revgate target rolled out (required): nodes of one
	// target coordinate, other targets' rollouts are apart.
	Target string
	// Node is this node's name (required); nodes take their turns in the
	// order of their names.
	Node string
	// LeaseDuration is how long a node's status and the turn stay valid
	// without being renewed; default 40s. Run renews them every third of it.
	LeaseDuration time.Duration
	// Poll is how soon to ask again while another node's turn or verdict is
	// awaited; default 5s.
	Poll time.Duration
	// StoppedRecheck is how soon to ask again about a stopped snapshot;
	// default 1m (a newer snapshot is asked about at once anyway).
	StoppedRecheck time.Duration
	// JoinGrace is how long a node that just published its first status
	// waits before its first turn, so that nodes started at about the same
	// time have published theirs and the turns follow the names; default a
	// third of LeaseDuration, the renewal period. A restarted controller
	// finds its status and does not wait.
	JoinGrace time.Duration
	// Clock is the time of the Leases and of their renewal; default
	// clock.RealClock.
	Clock clock.WithTicker
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Rollout is one node's part in node-by-node rollouts. MayInstall and
// Report are the controller's seam; Run keeps the node's Leases renewed.
type Rollout struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// stoppedLogged remembers the stopped snapshots already logged.
	stoppedLogged map[string]bool
	// lastHeld is why the last snapshot was held back, as logged: a wait
	// that goes on for the same reason is logged once at Info, then at
	// Debug on every poll.
	lastHeld string
}

var _ controller.Rollout = (*Rollout)(nil)

// New checks and defaults opts.
func New(opts Options) (*Rollout, error) {
	if opts.Client == nil {
		return nil, errors.New("rollout: no Kubernetes client")
	}
	if opts.Target == "" || opts.Node == "" {
		return nil, errors.New("rollout: target and node name are required")
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.LeaseDuration < minLeaseDuration {
		return nil, fmt.Errorf("rollout: lease duration %s is below %s", opts.LeaseDuration, minLeaseDuration)
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.StoppedRecheck <= 0 {
		opts.StoppedRecheck = DefaultStoppedRecheck
	}
	if opts.JoinGrace <= 0 {
		opts.JoinGrace = opts.LeaseDuration / 3
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	log := opts.Logger.With("component", "rollout", "target", opts.Target, "node", opts.Node)
	return &Rollout{opts: opts, log: log, stoppedLogged: map[string]bool{}}, nil
}

// MayInstall reports whether this node may install the snapshot with the
// given digest now: no other node fell back from it, every live node whose
// name sorts before this one's judged it good (a node that went quiet while
// installing it holds it back too), and this node holds the turn. When it may, the node's status says it installs the snapshot. When
// it may not, retryAfter says when to ask again; a turn held for another
// snapshot that this node cannot install now is given up, since the
// controller moved on from that snapshot.
func (r *Rollout) MayInstall(ctx context.Context, digest string) (bool, time.Duration, error) {
	now := r.opts.Clock.Now()
	own, err := r.writeStatus(ctx, nil)
	if err != nil {
		return false, 0, err
	}
	statuses, err := r.Statuses(ctx)
	if err != nil {
		return false, 0, err
	}
	wait := func(after time.Duration, why string, args ...any) (bool, time.Duration, error) {
		if err := r.releaseTurnUnless(ctx, digest); err != nil {
			return false, 0, err
		}
		r.logHeld(digest, why, args)
		return false, after, nil
	}
	for _, s := range statuses {
		// Expired or not, a node's fallback stops the snapshot; this node's
		// own does not stop its own next attempt.
		if s.Node != r.opts.Node && s.Digest == digest && s.Verdict == VerdictFailed {
			r.logStopped(digest, s)
			if err := r.releaseTurnUnless(ctx, digest); err != nil {
				return false, 0, err
			}
			return false, r.opts.StoppedRecheck, nil
		}
	}
	if joined := own.Joined; now.Before(joined.Add(r.opts.JoinGrace)) {
		return wait(joined.Add(r.opts.JoinGrace).Sub(now), "this node just joined; the others may not have published their status yet")
	}
	for _, s := range statuses {
		if s.Node >= r.opts.Node {
			continue
		}
		switch {
		case !s.Live && s.Digest == digest && s.Verdict == VerdictInstalling:
			// It went quiet while installing this very snapshot: the
			// snapshot may be what stopped it.
			return wait(r.opts.StoppedRecheck, "an earlier node stopped renewing its status while installing it", "waiting_for", s.Node)
		case !s.Live:
			continue // gone: not waited for
		case s.Digest != digest || s.Verdict != VerdictGood:
			return wait(r.opts.Poll, "an earlier node has not judged it good", "waiting_for", s.Node, "its_digest", s.Digest, "its_verdict", s.Verdict)
		}
	}
	taken, holderName, err := r.takeTurn(ctx, digest, statuses, now)
	if err != nil {
		return false, 0, err
	}
	if !taken {
		return wait(r.opts.Poll, "another node has the turn", "turn_holder", holderName)
	}
	if own.Digest != digest || own.Verdict != VerdictInstalling {
		if _, err := r.writeStatus(ctx, func(s *Status) {
			*s = Status{Digest: digest, Verdict: VerdictInstalling, Time: now}
		}); err != nil {
			return false, 0, err
		}
		r.event(ctx, corev1.EventTypeNormal, EventNodeInstalling, fmt.Sprintf("node %s installs snapshot %s (%s)", r.opts.Node, short(digest), r.progress(statuses, digest)))
	}
	r.logHeld("", "", nil)
	r.log.Info("this node's turn: installing the snapshot", "digest", digest)
	return true, 0, nil
}

// Report records this node's verdict on the snapshot: Good lets the next
// node take its turn, Failed stops the snapshot's rollout on every node with
// an Event naming this node and the reason. Either gives up the turn. A
// verdict already recorded is not recorded again.
func (r *Rollout) Report(ctx context.Context, digest string, v controller.Verdict) error {
	var verdict string
	switch v.Outcome {
	case revisions.OutcomeGood:
		verdict = VerdictGood
	case revisions.OutcomeFailed:
		verdict = VerdictFailed
	default:
		return nil
	}
	now := r.opts.Clock.Now()
	next := Status{Digest: digest, Revision: v.Revision, Verdict: verdict, Attempt: v.Attempt, Time: now}
	if verdict == VerdictFailed {
		next.Reason, next.Message = v.Reason, v.Message
	}
	var before Status
	if _, err := r.writeStatus(ctx, func(s *Status) {
		before = *s
		if s.Digest == next.Digest && s.Verdict == next.Verdict && s.Attempt == next.Attempt && s.Revision == next.Revision {
			next.Time = s.Time // recorded already
		}
		*s = next
	}); err != nil {
		return err
	}
	if err := r.releaseTurn(ctx, digest); err != nil {
		return err
	}
	if before.Digest == digest && before.Verdict == verdict && before.Attempt == v.Attempt && before.Revision == v.Revision {
		return nil
	}
	switch verdict {
	case VerdictGood:
		r.log.Info("the monitor judged the snapshot good; the next node may take its turn", "digest", digest, "revision", v.Revision)
		statuses, err := r.Statuses(ctx)
		progress := ""
		if err == nil {
			progress = " (" + r.progress(statuses, digest) + ")"
		}
		r.event(ctx, corev1.EventTypeNormal, EventNodeGood, fmt.Sprintf("node %s: revision %d of snapshot %s is good%s", r.opts.Node, v.Revision, short(digest), progress))
	case VerdictFailed:
		r.log.Warn("the monitor fell back from the snapshot; its rollout stops", "digest", digest, "revision", v.Revision, "reason", v.Reason)
		r.event(ctx, corev1.EventTypeWarning, EventStopped, fmt.Sprintf("node %s fell back from revision %d of snapshot %s with %s (attempt %d): %s; no other node installs this snapshot",
			r.opts.Node, v.Revision, short(digest), v.Reason, v.Attempt, v.Message))
	}
	return nil
}

// Run renews this node's status Lease, and the turn while it holds it,
// every third of the lease duration until ctx ends. Failures are logged and
// tried again at the next tick.
func (r *Rollout) Run(ctx context.Context) error {
	t := r.opts.Clock.NewTicker(r.opts.LeaseDuration / 3)
	defer t.Stop()
	for {
		if _, err := r.writeStatus(ctx, nil); err != nil && ctx.Err() == nil {
			r.log.Warn("renewing this node's rollout status failed", "err", err)
		}
		if err := r.renewTurn(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("renewing the turn failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Statuses lists every node's status for the target, sorted by node name.
func (r *Rollout) Statuses(ctx context.Context) ([]Status, error) {
	list, err := r.leases().List(ctx, metav1.ListOptions{LabelSelector: TargetLabel + "=" + r.opts.Target})
	if err != nil {
		return nil, fmt.Errorf("list the rollout status of target %s: %w", r.opts.Target, err)
	}
	now := r.opts.Clock.Now()
	out := make([]Status, 0, len(list.Items))
	for i := range list.Items {
		if s := statusOf(&list.Items[i], now); s.Node != "" {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

func (r *Rollout) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	List(context.Context, metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
} {
	return r.opts.Client.CoordinationV1().Leases(r.opts.Namespace)
}

// conflictTries bounds the read-modify-write loops on a Lease.
const conflictTries = 5

// writeStatus renews this node's status Lease, creating it when missing,
// and applies change (nil: renew only) to the status it publishes. It
// returns the status as written.
func (r *Rollout) writeStatus(ctx context.Context, change func(*Status)) (Status, error) {
	name := StatusLeaseName(r.opts.Target, r.opts.Node)
	for range conflictTries {
		now := r.opts.Clock.Now()
		l, err := r.leases().Get(ctx, name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return Status{}, fmt.Errorf("read this node's rollout status: %w", err)
		}
		if create {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace,
				Labels: map[string]string{TargetLabel: r.opts.Target}}}
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		s := statusOf(l, now)
		if change != nil {
			change(&s)
		}
		s.annotate(l.Annotations)
		renew(l, r.opts.Node, now, r.opts.LeaseDuration)
		if create {
			_, err = r.leases().Create(ctx, l, metav1.CreateOptions{})
		} else {
			_, err = r.leases().Update(ctx, l, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return Status{}, fmt.Errorf("write this node's rollout status: %w", err)
		}
		s.Node, s.Live, s.Joined = r.opts.Node, true, l.Spec.AcquireTime.Time
		return s, nil
	}
	return Status{}, fmt.Errorf("write this node's rollout status: %d conflicts in a row", conflictTries)
}

// takeTurn takes the target's turn for digest: it is free (no holder), this
// node's already, expired, or held by a node whose status is not live. It
// returns the holder when the turn is another node's.
func (r *Rollout) takeTurn(ctx context.Context, digest string, statuses []Status, now time.Time) (bool, string, error) {
	liveNodes := map[string]bool{}
	for _, s := range statuses {
		liveNodes[s.Node] = s.Live
	}
	name := TurnLeaseName(r.opts.Target)
	l, err := r.leases().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace,
			Annotations: map[string]string{AnnotationDigest: digest}}}
		renew(l, r.opts.Node, now, r.opts.LeaseDuration)
		_, err := r.leases().Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, "", nil // another node was faster; ask again
		}
		if err != nil {
			return false, "", fmt.Errorf("take the turn: %w", err)
		}
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("read the turn: %w", err)
	}
	h := holder(l)
	if h != "" && h != r.opts.Node && live(l, now) && liveNodes[h] {
		return false, h, nil
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationDigest] = digest
	renew(l, r.opts.Node, now, r.opts.LeaseDuration)
	// The update carries the resourceVersion read: of two nodes taking a
	// free turn at once, one gets a conflict.
	_, err = r.leases().Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return false, h, nil
	}
	if err != nil {
		return false, "", fmt.Errorf("take the turn: %w", err)
	}
	if h != "" && h != r.opts.Node {
		r.log.Info("took over the turn from a node that is gone", "gone", h)
	}
	return true, "", nil
}

// releaseTurn gives up the turn when this node holds it for digest.
func (r *Rollout) releaseTurn(ctx context.Context, digest string) error {
	return r.updateTurn(ctx, func(l *coordinationv1.Lease) bool {
		if holder(l) != r.opts.Node || l.Annotations[AnnotationDigest] != digest {
			return false
		}
		l.Spec.HolderIdentity = nil
		return true
	})
}

// releaseTurnUnless gives up the turn when this node holds it for another
// snapshot than digest: the controller asks about digest, so it moved on.
func (r *Rollout) releaseTurnUnless(ctx context.Context, digest string) error {
	return r.updateTurn(ctx, func(l *coordinationv1.Lease) bool {
		if holder(l) != r.opts.Node || l.Annotations[AnnotationDigest] == digest {
			return false
		}
		r.log.Info("giving up the turn for a snapshot the controller moved on from", "its_digest", l.Annotations[AnnotationDigest])
		l.Spec.HolderIdentity = nil
		return true
	})
}

// renewTurn renews the turn while this node holds it.
func (r *Rollout) renewTurn(ctx context.Context) error {
	return r.updateTurn(ctx, func(l *coordinationv1.Lease) bool {
		if holder(l) != r.opts.Node {
			return false
		}
		renew(l, r.opts.Node, r.opts.Clock.Now(), r.opts.LeaseDuration)
		return true
	})
}

// updateTurn applies change to the turn Lease and writes it when change
// says so; a missing turn needs nothing.
func (r *Rollout) updateTurn(ctx context.Context, change func(*coordinationv1.Lease) bool) error {
	for range conflictTries {
		l, err := r.leases().Get(ctx, TurnLeaseName(r.opts.Target), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the turn: %w", err)
		}
		if !change(l) {
			return nil
		}
		_, err = r.leases().Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write the turn: %w", err)
		}
		return nil
	}
	return fmt.Errorf("write the turn: %d conflicts in a row", conflictTries)
}

// logStopped logs once per snapshot that a node's fallback stopped it.
func (r *Rollout) logStopped(digest string, s Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stoppedLogged[digest] {
		return
	}
	r.stoppedLogged[digest] = true
	r.log.Warn("snapshot held back: a node fell back from it", "digest", digest, "failed_node", s.Node, "reason", s.Reason, "revision", s.Revision)
}

// logHeld logs why a snapshot is held back: at Info when the snapshot or
// the reason changed since the last call, at Debug otherwise. An empty
// digest forgets the last reason.
func (r *Rollout) logHeld(digest, why string, args []any) {
	key := fmt.Sprint(digest, why, args)
	r.mu.Lock()
	same := key == r.lastHeld
	r.lastHeld = key
	r.mu.Unlock()
	if digest == "" {
		return
	}
	level := slog.LevelInfo
	if same {
		level = slog.LevelDebug
	}
	r.log.Log(context.Background(), level, "snapshot held back: "+why, append([]any{"digest", digest}, args...)...)
}

// progress says how many live nodes judged digest good, e.g. "1 of 3
// nodes good".
func (r *Rollout) progress(statuses []Status, digest string) string {
	good, total := 0, 0
	for _, s := range statuses {
		if !s.Live && s.Node != r.opts.Node {
			continue
		}
		total++
		if s.Digest == digest && s.Verdict == VerdictGood {
			good++
		}
	}
	return fmt.Sprintf("%d of %d nodes good", good, total)
}

// short is the start of a digest, for messages.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
