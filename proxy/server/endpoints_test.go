package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/model"
)

// liveSlice is an EndpointSlice of Service ns/web whose endpoints listen on
// the loopback addresses addrs ("127.0.0.1:port", one port for all).
func liveSlice(t testing.TB, name string, addrs ...string) discoveryv1.EndpointSlice {
	t.Helper()
	s := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"kubernetes.io/service-name": "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		p, pn := int32(n), "http"
		s.Ports = []discoveryv1.EndpointPort{{Name: &pn, Port: &p}}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{host}})
	}
	return s
}

// webSnapshot routes every request to Service ns/web port http (80), whose
// revision endpoints are eps.
func webSnapshot(eps ...string) (*model.Snapshot, *model.Backend) {
	sb := newSnapshot()
	be := &model.Backend{Key: "ns/web:80", Service: model.ObjectRef{Kind: "Service", Namespace: "ns", Name: "web"},
		Port: model.ServicePort{Name: "http", Number: 80, TargetPort: 8080}, Endpoints: eps}
	sb.s.Backends[be.Key] = be
	sb.route("", "/", model.PathPrefix, single("web", be))
	return sb.s, be
}

func poolAddrs(g *Gateway, key string) []string {
	out := []string{}
	for _, e := range g.runtime.Load().pools[key].Endpoints() {
		out = append(out, e.Addr)
	}
	sort.Strings(out)
	return out
}

func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func writeLive(t testing.TB, path string, slices ...discoveryv1.EndpointSlice) {
	t.Helper()
	if err := config.WriteEndpointsFile(path, slices); err != nil {
		t.Fatal(err)
	}
}

// answers returns the upstream names that answered n requests.
func answers(t testing.TB, g *Gateway, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i := 0; i < n; i++ {
		code, hdr, _ := get(t, nil, url(g, "http", "/"), "any.example", nil)
		if code != 200 {
			out[fmt.Sprint(code)]++
			continue
		}
		out[hdr.Get("X-Upstream")]++
	}
	return out
}

// TestLiveEndpointsServed drives a serving gateway through live endpoints
// files: scale up, scale down, a refused file, the file gone.
func TestLiveEndpointsServed(t *testing.T) {
	a, b := newEcho(t, "a"), newEcho(t, "b")
	snap, _ := webSnapshot(addrOf(a))
	// The folder does not exist yet: the writer creates it with the file.
	file := filepath.Join(t.TempDir(), "gw-live", "endpoints.json")
	g, _ := runGateway(t, snap, Options{Endpoints: EndpointsOptions{File: file, RelistPeriod: time.Hour}})
	admin := func(p string) string { _, _, body := get(t, nil, url(g, "admin", p), "", nil); return body }
	if got := answers(t, g, 4); got["a"] != 4 {
		t.Fatalf("revision endpoints: answers %v", got)
	}

	writeLive(t, file, liveSlice(t, "web-a", addrOf(a)), liveSlice(t, "web-b", addrOf(b)))
	waitUntil(t, 5*time.Second, "a and b live", func() bool { return len(poolAddrs(g, "ns/web:80")) == 2 })
	if got := answers(t, g, 8); got["a"] == 0 || got["b"] == 0 || got["a"]+got["b"] != 8 {
		t.Fatalf("after scaling up: answers %v", got)
	}
	metrics := admin("/metrics")
	for _, want := range []string{
		`revgate_endpoint_healthy{backend="ns/web:80",endpoint="` + addrOf(b) + `"} 1`,
		`revgate_endpoints_file_updates_total 1`,
		`revgate_endpoints_live_backends 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	writeLive(t, file, liveSlice(t, "web-b", addrOf(b)))
	waitUntil(t, 5*time.Second, "only b live", func() bool { return reflect.DeepEqual(poolAddrs(g, "ns/web:80"), []string{addrOf(b)}) })
	if got := answers(t, g, 4); got["b"] != 4 {
		t.Fatalf("after scaling down: answers %v", got)
	}
	if m := admin("/metrics"); strings.Contains(m, `endpoint="`+addrOf(a)+`"`) {
		t.Error("a removed endpoint is still in revgate_endpoint_healthy")
	}
	var routes []routeDoc
	if err := json.Unmarshal([]byte(admin("/debug/config/routes")), &routes); err != nil || len(routes) != 1 ||
		len(routes[0].Backends[0].Endpoints) != 1 || routes[0].Backends[0].Endpoints[0].Address != addrOf(b) {
		t.Errorf("routes document %+v (%v)", routes, err)
	}

	// A file that does not decode changes nothing and is counted.
	if err := os.WriteFile(file+".tmp", []byte(`{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the refused file counted", func() bool {
		return strings.Contains(admin("/metrics"), `revgate_endpoints_file_errors_total{reason="decode"} 1`)
	})
	var doc endpointsDoc
	if err := json.Unmarshal([]byte(admin("/debug/config/endpoints")), &doc); err != nil || doc.State != liveRejected ||
		doc.Error != file+`: items[0]: want apiVersion "discovery.k8s.io/v1" and kind "EndpointSlice", got "" and "Pod"` || doc.LiveBackends != 1 || doc.AppliedAt == nil {
		t.Errorf("endpoints document %+v (%v)", doc, err)
	}
	if got := answers(t, g, 4); got["b"] != 4 {
		t.Fatalf("after a refused file: answers %v", got)
	}
	if code, _, body := get(t, nil, url(g, "admin", "/readyz?verbose"), "", nil); code != 200 {
		t.Fatalf("a refused endpoints file made the gateway not ready: %s", body)
	}

	// No file: the revision's endpoints again.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "revision endpoints back", func() bool { return reflect.DeepEqual(poolAddrs(g, "ns/web:80"), []string{addrOf(a)}) })
	if got := answers(t, g, 4); got["a"] != 4 {
		t.Fatalf("after the file went: answers %v", got)
	}
}

// TestLiveEndpointsAtStart: a file present at start is applied before the
// gateway serves anything.
func TestLiveEndpointsAtStart(t *testing.T) {
	a, b := newEcho(t, "a"), newEcho(t, "b")
	snap, _ := webSnapshot(addrOf(a))
	file := filepath.Join(t.TempDir(), "endpoints.json")
	writeLive(t, file, liveSlice(t, "web-b", addrOf(b)))
	g := New(snap, Options{Endpoints: EndpointsOptions{File: file}, Logger: slog.New(slog.DiscardHandler)})
	if got := poolAddrs(g, "ns/web:80"); !reflect.DeepEqual(got, []string{addrOf(b)}) {
		t.Fatalf("endpoints before serving %v", got)
	}
	// Without a file, live endpoints are off.
	off := New(snap, Options{Logger: slog.New(slog.DiscardHandler)})
	if got := poolAddrs(off, "ns/web:80"); !reflect.DeepEqual(got, []string{addrOf(a)}) || off.debugEndpoints().(endpointsDoc).State != liveOff {
		t.Fatalf("without a file: endpoints %v, state %+v", got, off.debugEndpoints())
	}
}

// newWatched makes a gateway following file, not serving, with a fake clock
// for the relist period.
func newWatched(t *testing.T, file string, eps ...string) (*Gateway, func(time.Duration)) {
	t.Helper()
	snap, _ := webSnapshot(eps...)
	clk := newFakeClock()
	g := New(snap, Options{Endpoints: EndpointsOptions{File: file, RelistPeriod: time.Minute}, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	return g, func(d time.Duration) {
		waitUntil(t, 5*time.Second, "the relist ticker", func() bool { return clk.Tickers(time.Minute) > 0 })
		clk.Step(d)
	}
}

func runWatch(t *testing.T, g *Gateway) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g.runLiveEndpoints(ctx)
}

func TestEndpointsWatcher(t *testing.T) {
	const a, b, c = "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"
	is := func(g *Gateway, want ...string) func() bool {
		return func() bool { return reflect.DeepEqual(poolAddrs(g, "ns/web:80"), want) }
	}
	t.Run("rename into place", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "endpoints.json")
		g, _ := newWatched(t, file, a)
		runWatch(t, g)
		time.Sleep(50 * time.Millisecond) // let the watch start; a miss would wait for the relist
		writeLive(t, file, liveSlice(t, "web-b", b))
		waitUntil(t, 5*time.Second, "b", is(g, b))
		writeLive(t, file, liveSlice(t, "web-b", b), liveSlice(t, "web-c", c))
		waitUntil(t, 5*time.Second, "b and c", is(g, b, c))
	})
	t.Run("created and written in place", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "endpoints.json")
		g, _ := newWatched(t, file, a)
		runWatch(t, g)
		time.Sleep(50 * time.Millisecond)
		data, _ := config.EncodeEndpoints([]discoveryv1.EndpointSlice{liveSlice(t, "web-c", c)})
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "c", is(g, c))
	})
	t.Run("deleted", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "endpoints.json")
		writeLive(t, file, liveSlice(t, "web-b", b))
		g, _ := newWatched(t, file, a)
		if !is(g, b)() {
			t.Fatal("file not applied at start")
		}
		runWatch(t, g)
		time.Sleep(50 * time.Millisecond)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "the revision's a", is(g, a))
	})
	t.Run("dotfiles and other files ignored", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "endpoints.json")
		g, advance := newWatched(t, file, a)
		runWatch(t, g)
		time.Sleep(50 * time.Millisecond)
		writeLive(t, filepath.Join(dir, ".endpoints.json"), liveSlice(t, "web-b", b))
		writeLive(t, filepath.Join(dir, "other.json"), liveSlice(t, "web-b", b))
		advance(time.Minute)
		time.Sleep(200 * time.Millisecond)
		if !is(g, a)() {
			t.Fatalf("a file other than %s was applied: %v", file, poolAddrs(g, "ns/web:80"))
		}
		// The watch still works.
		writeLive(t, file, liveSlice(t, "web-c", c))
		waitUntil(t, 5*time.Second, "c", is(g, c))
	})
	t.Run("relist catches what the watch missed", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "endpoints.json")
		g, advance := newWatched(t, file, a)
		// A watcher that never starts: only the relist reads the file.
		g.live.newFSW = func() (*fsnotify.Watcher, error) { return nil, errors.New("no inotify instances left") }
		runWatch(t, g)
		writeLive(t, file, liveSlice(t, "web-b", b))
		time.Sleep(200 * time.Millisecond)
		if !is(g, a)() {
			t.Fatal("applied without a watch or a relist")
		}
		advance(time.Minute)
		waitUntil(t, 5*time.Second, "b after the relist", is(g, b))
	})
	t.Run("folder created later", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "live", "endpoints.json")
		g, _ := newWatched(t, file, a)
		runWatch(t, g)
		time.Sleep(50 * time.Millisecond)
		writeLive(t, file, liveSlice(t, "web-b", b))
		waitUntil(t, 5*time.Second, "b", is(g, b))
		writeLive(t, file, liveSlice(t, "web-c", c))
		waitUntil(t, 5*time.Second, "c", is(g, c))
	})
	t.Run("unreadable file keeps the endpoints", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "endpoints.json")
		writeLive(t, file, liveSlice(t, "web-b", b))
		g, advance := newWatched(t, file, a)
		var fail atomic.Bool
		g.live.readFile = func(p string) ([]byte, error) {
			if fail.Load() {
				return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}
			}
			return os.ReadFile(p)
		}
		runWatch(t, g)
		fail.Store(true)
		writeLive(t, file, liveSlice(t, "web-c", c))
		advance(time.Minute)
		waitUntil(t, 5*time.Second, "the read error", func() bool {
			return strings.Contains(g.debugEndpoints().(endpointsDoc).Error, "permission denied")
		})
		if !is(g, b)() {
			t.Fatalf("an unreadable file changed the endpoints: %v", poolAddrs(g, "ns/web:80"))
		}
		fail.Store(false)
		advance(time.Minute)
		waitUntil(t, 5*time.Second, "c once readable", is(g, c))
	})
}
