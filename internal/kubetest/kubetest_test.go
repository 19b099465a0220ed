package kubetest

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestServerRoundTrip writes and reads back a ConfigMap through both the
// rest.Config and the kubeconfig file, proving the server is real and both
// entry points work.
func TestServerRoundTrip(t *testing.T) {
	cs, err := kubernetes.NewForConfig(Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cs2, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs2.CoreV1().ConfigMaps("default").Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("data = %v", got.Data)
	}
}

// An outage: with the API server stopped requests fail, and once it is
// started again on the same address the data written before is there.
func TestStopAndStartAPIServer(t *testing.T) {
	cfg := Config(t)
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "outage", Namespace: "default"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	StopAPIServer(t)
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "outage", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered while stopped")
	}
	StartAPIServer(t)
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "outage", metav1.GetOptions{}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}
