package demo

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, want string
	}{
		{"root", http.MethodGet, "/", "a GET /\n"},
		{"path", http.MethodPost, "/api/x", "a POST /api/x\n"},
		{"healthz", http.MethodGet, "/healthz", "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Handler("a").ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != http.StatusOK || rec.Body.String() != tc.want {
				t.Fatalf("got %d %q, want 200 %q", rec.Code, rec.Body.String(), tc.want)
			}
			if got := rec.Header().Get(HeaderName); got != "a" {
				t.Fatalf("%s = %q, want a", HeaderName, got)
			}
		})
	}
}

func TestServeListenerStopsOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, "b", nil) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "b GET /x\n" {
		t.Fatalf("body %q", body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeListener: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener did not return after cancel")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

func TestPodManifest(t *testing.T) {
	data, err := PodManifest("/bin/revgate", DefaultUpstreams)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatalf("manifest does not parse as a Pod: %v\n%s", err, data)
	}
	if len(pod.Spec.Containers) != len(DefaultUpstreams) {
		t.Fatalf("%d containers, want %d", len(pod.Spec.Containers), len(DefaultUpstreams))
	}
	for i, u := range DefaultUpstreams {
		c := pod.Spec.Containers[i]
		want := []string{"/bin/revgate", "demo-upstream", "--listen=" + u.Addr, "--name=" + u.Name}
		if c.Name != u.Name || strings.Join(c.Command, " ") != strings.Join(want, " ") {
			t.Errorf("container %d: %s %q, want %s %q", i, c.Name, c.Command, u.Name, want)
		}
	}
}
