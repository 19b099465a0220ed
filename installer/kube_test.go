package installer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/installer/installertest"
	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// fastBackOff retries quickly, bounded by max.
func fastBackOff(max time.Duration) func() backoff.BackOff {
	return func() backoff.BackOff {
		return backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(20*time.Millisecond),
			backoff.WithMaxInterval(200*time.Millisecond),
			backoff.WithMaxElapsedTime(max),
		)
	}
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKubeSource(t *testing.T) {
	ctx := context.Background()
	cfg := kubetest.Config(t)
	admin := clientFor(t, cfg)
	ns := "installer-test"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "routes"}, Data: map[string]string{"ingress.yaml": "kind: Ingress\n", "svc.yaml": "kind: Service\n"}, BinaryData: map[string][]byte{"blob.bin": {0, 1, 2, 255}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "extra"}, Data: map[string]string{"eps.yaml": "kind: EndpointSlice\n"}},
	} {
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	t.Run("install", func(t *testing.T) {
		l := installertest.TempLayout(t)
		var retries atomic.Int32
		src := &installer.KubeSource{
			Client: admin, Namespace: ns,
			ConfigMaps: []string{"routes"}, Secrets: []string{"tls"},
			OptionalConfigMaps: []string{"extra", "absent"}, OptionalSecrets: []string{"absent-too"},
			OnRetry: func(error, time.Duration) { retries.Add(1) }, Logger: quiet,
		}
		res, err := newInstaller(l, src).Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := installertest.Files{
			"configmaps/routes/ingress.yaml": []byte("kind: Ingress\n"),
			"configmaps/routes/svc.yaml":     []byte("kind: Service\n"),
			"configmaps/routes/blob.bin":     {0, 1, 2, 255},
			"configmaps/extra/eps.yaml":      []byte("kind: EndpointSlice\n"),
			"secrets/tls/tls.crt":            []byte("CERT"),
			"secrets/tls/tls.key":            []byte("KEY"),
		}
		// Check verifies the content and that every secret is 0600.
		if n, err := installertest.Check(l, want); err != nil || n != res.Revision {
			t.Fatalf("published %d: %v", n, err)
		}
		if retries.Load() != 0 {
			t.Fatalf("%d retries", retries.Load())
		}
	})

	for _, tt := range []struct {
		name   string
		client kubernetes.Interface
		ns     string
		check  func(error) bool
	}{
		{"required configmap missing", admin, ns, apierrors.IsNotFound},
		{"namespace missing", admin, "no-such-namespace", apierrors.IsNotFound},
		{"forbidden", func() kubernetes.Interface {
			c := rest.CopyConfig(cfg)
			c.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
			return clientFor(t, c)
		}(), ns, apierrors.IsForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := installertest.TempLayout(t)
			var retries atomic.Int32
			names := []string{"routes"}
			if tt.name == "required configmap missing" {
				names = []string{"routes", "absent"}
			}
			src := &installer.KubeSource{
				Client: tt.client, Namespace: tt.ns, ConfigMaps: names,
				NewBackOff: fastBackOff(5 * time.Second),
				OnRetry:    func(error, time.Duration) { retries.Add(1) }, Logger: quiet,
			}
			_, err := newInstaller(l, src).Run(ctx)
			if err == nil || !tt.check(err) {
				t.Fatalf("unexpected error %v", err)
			}
			if retries.Load() != 0 {
				t.Fatalf("a 4xx was retried %d times", retries.Load())
			}
			if _, err := os.Stat(l.ResourceDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("something was written: %v", err)
			}
		})
	}
}

// retryDriver runs a KubeSource's Load on a fake clock: it steps the clock
// by each wait the source announces once the source's timer is armed, so
// that the retries take no real time, and records the waits.
type retryDriver struct {
	clk   *clocktest.Clock
	waits chan time.Duration
}

func newRetryDriver(src *installer.KubeSource) *retryDriver {
	d := &retryDriver{clk: clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), waits: make(chan time.Duration, 1)}
	src.Clock = d.clk
	src.OnRetry = func(_ error, wait time.Duration) { d.waits <- wait }
	return d
}

// load runs src.Load, returning its result and the waits between reads.
func (d *retryDriver) load(t *testing.T, src *installer.KubeSource) (*installer.Config, []time.Duration, error) {
	t.Helper()
	type result struct {
		cfg *installer.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := src.Load(context.Background())
		done <- result{cfg, err}
	}()
	var waits []time.Duration
	for {
		select {
		case r := <-done:
			return r.cfg, waits, r.err
		case w := <-d.waits:
			waits = append(waits, w)
			if !d.clk.AwaitPending(w, 1, 30*time.Second) {
				t.Fatalf("no timer of %s after retry %d", w, len(waits))
			}
			d.clk.Step(w)
		}
	}
}

// A closed port is retried with the default backoff (250ms growing to 10s,
// with jitter) until the next wait would pass RetryTimeout, on the
// source's clock.
func TestKubeSourceConnectionRefusedIsRetriedThenFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	src := &installer.KubeSource{
		Client:       clientFor(t, &rest.Config{Host: "http://" + addr, Timeout: 2 * time.Second}),
		Namespace:    "ns",
		ConfigMaps:   []string{"routes"},
		RetryTimeout: time.Minute,
		Logger:       quiet,
	}
	d := newRetryDriver(src)
	start := d.clk.Now()
	_, waits, err := d.load(t, src)
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	if len(waits) < 5 {
		t.Fatalf("retried %d times in a minute, want more: %v", len(waits), err)
	}
	// The jitter is ±50% of 250ms, 375ms, ... up to 10s.
	if waits[0] < 125*time.Millisecond || waits[0] > 375*time.Millisecond {
		t.Fatalf("first wait %s, want 250ms ± 50%%", waits[0])
	}
	for i, w := range waits {
		if w > 15*time.Second {
			t.Fatalf("wait %d is %s, past 10s + 50%%", i, w)
		}
	}
	// The backoff stops once the next wait would pass the bound.
	if elapsed := d.clk.Since(start); elapsed > time.Minute || elapsed < time.Minute-15*time.Second {
		t.Fatalf("gave up after %s of waits %v, want within the last wait before 1m", elapsed, waits)
	}
}

// TestKubeSourceRetries5xxAnd429 serves 503, then 429, then 500, then the
// ConfigMap.
func TestKubeSourceRetries5xxAnd429(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n := calls.Add(1)
		code := map[int32]int{1: http.StatusServiceUnavailable, 2: http.StatusTooManyRequests, 3: http.StatusInternalServerError}[n]
		if code != 0 {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Message: fmt.Sprintf("try again (%d)", n)})
			return
		}
		_ = json.NewEncoder(w).Encode(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "routes", Namespace: "ns"}, Data: map[string]string{"a": "b"}})
	}))
	defer srv.Close()
	src := &installer.KubeSource{
		Client: clientFor(t, &rest.Config{Host: srv.URL}), Namespace: "ns", ConfigMaps: []string{"routes"}, Logger: quiet,
	}
	cfg, waits, err := newRetryDriver(src).load(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.ConfigMaps["routes"]["a"]) != "b" || len(waits) != 3 {
		t.Fatalf("config %v after %d retries", cfg.ConfigMaps, len(waits))
	}
}

func TestRetriable(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"not found", apierrors.NewNotFound(gr, "x"), false},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{"unauthorized", apierrors.NewUnauthorized("no"), false},
		{"bad request", apierrors.NewBadRequest("no"), false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"internal", apierrors.NewInternalError(errors.New("boom")), true},
		{"unavailable", apierrors.NewServiceUnavailable("later"), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), true},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"cancelled", fmt.Errorf("get: %w", context.Canceled), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := installer.Retriable(tt.err); got != tt.want {
				t.Fatalf("Retriable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// With Revision set, the source reads OpenShift's revisioned copies
// <name>-<N> and installs them under <name>, as library-go's installer lays
// them out.
func TestKubeSourceRevisionedNames(t *testing.T) {
	ctx := context.Background()
	admin := clientFor(t, kubetest.Config(t))
	ns := "installer-revisioned"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, n := range []string{"7", "8"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "routes-" + n}, Data: map[string]string{"ingress.yaml": "revision " + n + "\n"}}
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds-7"}, Data: map[string][]byte{"token": []byte("seven")}}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	src := func(rev int) *installer.KubeSource {
		return &installer.KubeSource{Client: admin, Namespace: ns, Revision: rev, ConfigMaps: []string{"routes"},
			Secrets: []string{"creds"}, OptionalConfigMaps: []string{"extra"}, NewBackOff: fastBackOff(time.Second), Logger: quiet}
	}
	t.Run("revision 7", func(t *testing.T) {
		l := installertest.TempLayout(t)
		in := newInstaller(l, src(7))
		in.Revision = 7
		if _, err := in.Run(ctx); err != nil {
			t.Fatal(err)
		}
		want := installertest.Files{"configmaps/routes/ingress.yaml": []byte("revision 7\n"), "secrets/creds/token": []byte("seven")}
		if n, err := installertest.Check(l, want); err != nil || n != 7 {
			t.Fatalf("published %d: %v", n, err)
		}
	})
	t.Run("revision 8 lacks its secret", func(t *testing.T) {
		in := newInstaller(installertest.TempLayout(t), src(8))
		in.Revision = 8
		_, err := in.Run(ctx)
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), ns+"/creds-8") {
			t.Fatalf("want NotFound naming %s/creds-8, got %v", ns, err)
		}
	})
}
