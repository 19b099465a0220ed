package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/fallbackstatus"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/monitor/status"
	"github.com/revgate/revgate/revisions"
)

// TestMain is shared by every test of the command package: kubetest starts
// the API server on first use only and stops it after the last test.
func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// TestStatusCommandReadsMirrorPods runs `revgate status -o json --kubeconfig`
// through the root command against a real API server holding a mirror pod
// with fallback annotations (created by hand: there is no kubelet).
func TestStatusCommandReadsMirrorPods(t *testing.T) {
	kubeconfig := kubetest.Kubeconfig(t)
	cs, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	next := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	fb := &fallbackstatus.Fallback{ForRevision: 7, Reason: revisions.ReasonNotReady, Message: "[-]config failed: x",
		Time: next.Add(-time.Hour), Attempt: 1, ToRevision: 6, NextRetry: &next}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "statusgw-node-s", Namespace: "kube-system",
			Labels: map[string]string{"app": "statusgw", "revision": "6"}, Annotations: fb.Annotations()},
		Spec: corev1.PodSpec{NodeName: "node-s", Containers: []corev1.Container{{Name: "proxy", Image: "revgate:dev"}}},
	}
	pod, err = cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"status", "--target", "statusgw", "-o", "json", "--kubeconfig", kubeconfig,
		"--resource-dir", filepath.Join(root, "res"), "--manifests-dir", filepath.Join(root, "man")})
	defer rootCmd.SetArgs(nil)
	if err := rootCmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var r status.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(r.Nodes) != 1 {
		t.Fatalf("nodes = %+v", r.Nodes)
	}
	n := r.Nodes[0]
	if n.Node != "node-s" || !n.Ready || n.Revision != 6 || n.Fallback == nil || n.Fallback.ForRevision != 7 ||
		n.Fallback.NextRetry == nil || !n.Fallback.NextRetry.Equal(next) || n.Degraded.Status != metav1.ConditionTrue {
		t.Fatalf("node = %+v", n)
	}
}
