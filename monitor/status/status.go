// Package status collects what `revgate status` shows: the revisions on
// disk, the published one and whether it is a fallback, last-known-good,
// every recorded fallback and pending retry, and with a cluster client the
// mirror pods of every node with their fallback annotations.
//
// The JSON shape of Report is stable: fields are only ever added.
package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/revisions"
)

// Report is the status of one target.
type Report struct {
	// Target name.
	Target string `json:"target"`
	// Revisions found on disk, ascending.
	Revisions []int `json:"revisions"`
	// Published is the serving operand manifest in the manifests dir; nil
	// when none. In slots mode it is the slot that serves while another
	// revision rolls out beside it (revisions.ServingSlot).
	Published *Published `json:"published"`
	// Candidate is the operand manifest published beside the serving one,
	// being rolled out (slots mode only); absent when none.
	Candidate *Published `json:"candidate,omitempty"`
	// LastKnownGood revision; 0 when there is no link.
	LastKnownGood int `json:"lastKnownGood"`
	// Outcomes of the revisions the state file knows, ascending.
	Outcomes []Outcome `json:"outcomes"`
	// Fallbacks is every recorded fallback of every revision, oldest first.
	Fallbacks []Fallback `json:"fallbacks"`
	// PendingRetries are the failed revisions waiting for a retry, soonest first.
	PendingRetries []Retry `json:"pendingRetries"`
	// Nodes are the mirror pods found with a cluster client; absent without.
	Nodes []Node `json:"nodes,omitempty"`
	// Problems are things that could not be read; the rest is still reported.
	Problems []string `json:"problems,omitempty"`
}

// Published is the published operand manifest.
type Published struct {
	// Revision label of the manifest; 0 when it has none.
	Revision int `json:"revision"`
	// Fallback annotations when the manifest was put back by a fallback.
	Fallback *fallbackstatus.Fallback `json:"fallback,omitempty"`
	// Slot the manifest is published in (slots mode only).
	Slot string `json:"slot,omitempty"`
	// Pod is the static pod's metadata.name; its mirror pod is <pod>-<node>.
	Pod string `json:"pod,omitempty"`
}

// Outcome is what the state file says about one revision.
type Outcome struct {
	Revision  int       `json:"revision"`
	Outcome   string    `json:"outcome"`
	Attempts  int       `json:"attempts"`
	Reason    string    `json:"reason,omitempty"`
	DecidedAt time.Time `json:"decidedAt,omitzero"`
}

// Fallback is one recorded fallback.
type Fallback struct {
	// Revision that failed, and which of its rollouts (Attempt).
	Revision int `json:"revision"`
	Attempt  int `json:"attempt"`
	// To is the revision put back; 0 when there was none.
	To      int       `json:"to"`
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// Retry is a pending retry.
type Retry struct {
	Revision int       `json:"revision"`
	At       time.Time `json:"at"`
	// Attempt is the number the retry's rollout will have.
	Attempt int `json:"attempt"`
}

// Node is one node's mirror pod.
type Node struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Revision label of the mirror pod; 0 when missing.
	Revision int  `json:"revision"`
	Ready    bool `json:"ready"`
	// Slot label of the mirror pod (slots mode only).
	Slot string `json:"slot,omitempty"`
	// Serving tells the node's serving pod from a revision rolled out
	// beside it (fallbackstatus.ServingPod).
	Serving bool `json:"serving"`
	// Fallback read from the annotations; nil when none.
	Fallback *fallbackstatus.Fallback `json:"fallback,omitempty"`
	// Degraded is the condition derived from Fallback.
	Degraded metav1.Condition `json:"degraded"`
	// Error says why the annotations did not parse.
	Error string `json:"error,omitempty"`
}

// Collect reads the local status of the layout's target.
func Collect(l revisions.Layout, fs revisions.FS) (*Report, error) {
	l = l.Defaulted()
	r := &Report{Target: l.Target, Revisions: []int{}, Outcomes: []Outcome{}, Fallbacks: []Fallback{}, PendingRetries: []Retry{}}
	lst, err := l.List(fs)
	if err != nil {
		return nil, err
	}
	r.Revisions = append(r.Revisions, lst.Revisions...)

	lkg, _ := l.LastKnownGood(fs)
	slots, err := l.PublishedSlots(fs)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("read published manifests: %v", err))
	}
	if serving := revisions.ServingSlot(slots, lkg); serving != nil {
		for _, s := range slots {
			p, perr := parsePublished(s)
			if perr != nil {
				r.Problems = append(r.Problems, fmt.Sprintf("published manifest %s: %v", s.Path, perr))
			}
			if s.Slot == serving.Slot {
				r.Published = p
			} else {
				r.Candidate = p
			}
		}
	}

	lkg, err = l.LastKnownGood(fs)
	switch {
	case err == nil:
		r.LastKnownGood = lkg
	case !errors.Is(err, revisions.ErrNoLastKnownGood):
		r.Problems = append(r.Problems, err.Error())
	}

	st, err := revisions.LoadState(fs, l.StateFile())
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r, nil
	}
	nums := make([]int, 0, len(st.Revisions))
	for n := range st.Revisions {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		rs := st.Revisions[n]
		r.Outcomes = append(r.Outcomes, Outcome{Revision: n, Outcome: string(rs.Outcome), Attempts: rs.Attempts, Reason: rs.Reason, DecidedAt: rs.DecidedAt})
		for _, f := range rs.Fallbacks {
			r.Fallbacks = append(r.Fallbacks, Fallback{Revision: n, Attempt: f.Attempt, To: f.To, Time: f.Time, Reason: f.Reason, Message: f.Message})
		}
		if rs.NextRetry != nil {
			r.PendingRetries = append(r.PendingRetries, Retry{Revision: n, At: *rs.NextRetry, Attempt: max(rs.Attempts, 1) + 1})
		}
	}
	sort.SliceStable(r.Fallbacks, func(i, j int) bool { return r.Fallbacks[i].Time.Before(r.Fallbacks[j].Time) })
	sort.SliceStable(r.PendingRetries, func(i, j int) bool { return r.PendingRetries[i].At.Before(r.PendingRetries[j].At) })
	return r, nil
}

func parsePublished(s revisions.PublishedSlot) (*Published, error) {
	p := &Published{}
	if s.Labeled {
		p.Slot = string(s.Slot)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(s.Data, &pod); err != nil {
		return p, fmt.Errorf("parse: %w", err)
	}
	p.Pod = pod.Name
	if s.Err != nil {
		return p, s.Err
	}
	p.Revision = s.Revision
	fb, err := fallbackstatus.Parse(s.Annotations)
	if err != nil {
		return p, err
	}
	p.Fallback = fb
	return p, nil
}

// CollectNodes lists the mirror pods matching selector in namespace and
// reads each one's revision, Ready state and fallback annotations, sorted by
// node name.
func CollectNodes(ctx context.Context, client kubernetes.Interface, namespace, selector string) ([]Node, error) {
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list pods %q in %s: %w", selector, namespace, err)
	}
	byNode := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	serving := map[*corev1.Pod]bool{}
	for _, ps := range byNode {
		if p, ok := fallbackstatus.ServingPod(ps); ok {
			serving[p] = true
		}
	}
	nodes := make([]Node, 0, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		n := Node{Node: p.Spec.NodeName, Namespace: p.Namespace, Pod: p.Name, Slot: p.Labels[revisions.SlotLabel], Serving: serving[p]}
		fmt.Sscan(p.Labels[revisions.RevisionLabel], &n.Revision)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				n.Ready = c.Status == corev1.ConditionTrue
			}
		}
		fb, err := fallbackstatus.Parse(p.Annotations)
		if err != nil {
			n.Error = err.Error()
		}
		n.Fallback = fb
		n.Degraded = fallbackstatus.DegradedCondition(fb)
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Node != nodes[j].Node {
			return nodes[i].Node < nodes[j].Node
		}
		if nodes[i].Serving != nodes[j].Serving {
			return nodes[i].Serving
		}
		return nodes[i].Pod < nodes[j].Pod
	})
	return nodes, nil
}

// WriteText writes r for humans.
func WriteText(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "target:\t%s\n", r.Target)
	fmt.Fprintf(tw, "revisions:\t%s\n", ints(r.Revisions))
	switch {
	case r.Published == nil:
		fmt.Fprintf(tw, "published:\tnone\n")
	case r.Published.Fallback != nil:
		fmt.Fprintf(tw, "published:\t%d (fallback: %s)\n", r.Published.Revision, r.Published.Fallback.Summary())
	default:
		fmt.Fprintf(tw, "published:\t%d\n", r.Published.Revision)
	}
	if c := r.Candidate; c != nil {
		fmt.Fprintf(tw, "candidate:\t%d (being rolled out beside the published revision)\n", c.Revision)
	}
	if r.Published != nil && r.Published.Slot != "" {
		slots := fmt.Sprintf("%s: revision %d (serving)", r.Published.Slot, r.Published.Revision)
		if c := r.Candidate; c != nil {
			slots += fmt.Sprintf(", %s: revision %d (candidate)", c.Slot, c.Revision)
		}
		fmt.Fprintf(tw, "slots:\t%s\n", slots)
	}
	if r.LastKnownGood > 0 {
		fmt.Fprintf(tw, "last-known-good:\t%d\n", r.LastKnownGood)
	} else {
		fmt.Fprintf(tw, "last-known-good:\tnone\n")
	}
	for _, rt := range r.PendingRetries {
		fmt.Fprintf(tw, "retry:\trevision %d at %s (attempt %d)\n", rt.Revision, rt.At.UTC().Format(time.RFC3339), rt.Attempt)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Fallbacks) > 0 {
		fmt.Fprintln(w, "\nfallbacks:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tREVISION\tATTEMPT\tTO\tREASON\tMESSAGE")
		for _, f := range r.Fallbacks {
			to := "-"
			if f.To > 0 {
				to = fmt.Sprint(f.To)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", f.Time.UTC().Format(time.RFC3339), f.Revision, f.Attempt, to, f.Reason, oneLine(f.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Nodes != nil {
		fmt.Fprintln(w, "\nnodes:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPOD\tROLE\tREVISION\tREADY\tDEGRADED")
		for _, n := range r.Nodes {
			deg := string(n.Degraded.Status)
			if n.Fallback != nil {
				deg += ": " + n.Fallback.Summary()
			}
			if n.Error != "" {
				deg += " (" + n.Error + ")"
			}
			role := "candidate"
			if n.Serving {
				role = "serving"
			}
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%d\t%v\t%s\n", n.Node, n.Namespace, n.Pod, role, n.Revision, n.Ready, deg)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	return nil
}

func ints(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, " ")
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
