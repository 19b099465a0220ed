package controller

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/internal/clocktest"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// Timings of the tests against the API server: short debouncing, generous
// waits; nothing asserts how fast something happened.
const (
	testQuiet = 100 * time.Millisecond
	testMax   = time.Second
	waitLong  = 30 * time.Second
)

// quiet discards the controller's logs unless -v.
func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// clients are the admin clients of the shared API server.
type clients struct {
	cfg    *rest.Config
	client kubernetes.Interface
	dyn    dynamic.Interface
}

func adminClients(t *testing.T) clients {
	t.Helper()
	cfg := kubetest.Config(t)
	return clientsFor(t, cfg)
}

func clientsFor(t *testing.T, cfg *rest.Config) clients {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{cfg: cfg, client: client, dyn: dyn}
}

// apply creates (or replaces) every object of a YAML stream, resolving
// kinds through discovery, as kubectl apply would for new objects.
func apply(t *testing.T, c clients, manifest []byte) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	ctx := context.Background()
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("map %s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = c.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		_, err = ri.Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("apply %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
}

func readDeploy(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "controller", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var crdOnce sync.Once

// installCRD applies the IngressRoute CRD of deploy/ once and waits until
// the API server serves the resource.
func installCRD(t *testing.T, c clients) {
	t.Helper()
	crdOnce.Do(func() {
		apply(t, c, readDeploy(t, "ingressroute-crd.yaml"))
	})
	waitFor(t, waitLong, "IngressRoutes served", func() (bool, string) {
		_, err := c.dyn.Resource(IngressRouteResource).Namespace("default").List(context.Background(), metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", d, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordingWriter keeps every list of live endpoints it is handed.
type recordingWriter struct {
	mu     sync.Mutex
	writes [][]discoveryv1.EndpointSlice
}

func (w *recordingWriter) WriteEndpoints(slices []discoveryv1.EndpointSlice) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, slices)
	return nil
}

// addresses are the ready addresses of the last list written.
func (w *recordingWriter) addresses() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.writes) == 0 {
		return nil
	}
	var out []string
	for _, sl := range w.writes[len(w.writes)-1] {
		for _, ep := range sl.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	return out
}

// env is one test's world: its own namespace, ingress class and target
// folders, and a controller running in this process.
type env struct {
	t      *testing.T
	c      clients
	ns     string
	class  string
	layout revisions.Layout
	opts   Options
	eps    *recordingWriter
	run    *running
	// rollout is the controller's Rollout; nil: the default.
	rollout Rollout
	// clock is the controller's: it follows real time (see flow), and a
	// test jumps it forward past a retry time or grace instead of sleeping.
	clock *clocktest.Clock
}

// flowTick is the step in which an env's clock follows real time.
const flowTick = 10 * time.Millisecond

// flow moves clk on with real time, a flowTick at a time, until the test
// ends: the controller's debouncing and polling go on as on the real
// clock, while the API server's answers take the time they take.
func flow(t *testing.T, clk *clocktest.Clock) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(flowTick)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				clk.Step(flowTick)
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
}

// running is the controller an env runs, shared by the env's copies.
type running struct {
	mu    sync.Mutex
	ctl   *Controller
	syncs map[string]int
	stop  func()
}

// in returns the env for a subtest: its helpers fail t.
func (e *env) in(t *testing.T) *env {
	cp := *e
	cp.t = t
	return &cp
}

// publishAddr is the address the tests publish in Ingress status.
const publishAddr = "192.0.2.10"

func newEnv(t *testing.T, c clients) *env {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	ctx := context.Background()
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	e := &env{
		t: t, c: c, ns: name, class: name,
		layout: revisions.Layout{
			Target:         "revgate",
			ResourceDir:    filepath.Join(root, "resources"),
			ManifestsDir:   filepath.Join(root, "manifests"),
			LockFile:       filepath.Join(root, "revgate.lock"),
			TerminationLog: filepath.Join(root, "log", "termination.log"),
		},
		eps:   &recordingWriter{},
		run:   &running{syncs: map[string]int{}},
		clock: clocktest.New(time.Now().Truncate(time.Second)),
	}
	flow(t, e.clock)
	e.opts = Options{
		Layout:         e.layout,
		Render:         installer.RenderOptions{Binary: "/usr/local/bin/revgate"},
		NodeName:       "node-" + name,
		IngressClass:   e.class,
		Namespaces:     []string{e.ns},
		PublishAddress: publishAddr,
		QuietPeriod:    testQuiet,
		MaxDelay:       testMax,
	}
	t.Cleanup(func() {
		e.stopController()
		_ = c.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return e
}

// node returns another node of the env's cluster: the same namespace and
// class, its own node name, target folders, live endpoints and controller.
func (e *env) node(name string) *env {
	e.t.Helper()
	n := *e
	root := e.t.TempDir()
	n.layout = revisions.Layout{
		Target:         e.layout.Target,
		ResourceDir:    filepath.Join(root, "resources"),
		ManifestsDir:   filepath.Join(root, "manifests"),
		LockFile:       filepath.Join(root, "revgate.lock"),
		TerminationLog: filepath.Join(root, "log", "termination.log"),
	}
	n.opts.Layout, n.opts.NodeName = n.layout, name
	n.eps = &recordingWriter{}
	n.run = &running{syncs: map[string]int{}}
	e.t.Cleanup(n.stopController)
	return &n
}

// startController runs a controller with the env's options (edited by
// edit, when given) until stopController.
func (e *env) startController(c clients, edit func(*Options)) {
	e.t.Helper()
	opts := e.opts
	if edit != nil {
		edit(&opts)
	}
	if err := opts.Validate(); err != nil {
		e.t.Fatal(err)
	}
	ctl, err := New(opts, Deps{Client: c.client, Dynamic: c.dyn, Endpoints: e.eps, Rollout: e.rollout, Clock: e.clock, Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	ctl.onSync = func(loop string, err error) {
		if err != nil {
			e.t.Logf("%s sync: %v", loop, err)
			return
		}
		e.run.mu.Lock()
		e.run.syncs[loop]++
		e.run.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	e.run.mu.Lock()
	e.run.ctl = ctl
	e.run.syncs = map[string]int{}
	e.run.stop = func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("controller: %v", err)
		}
	}
	e.run.mu.Unlock()
}

func (e *env) stopController() {
	e.run.mu.Lock()
	stop := e.run.stop
	e.run.stop = nil
	e.run.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// syncCount is how many successful syncs a loop of the running controller did.
func (e *env) syncCount(loop string) int {
	e.run.mu.Lock()
	defer e.run.mu.Unlock()
	return e.run.syncs[loop]
}

// settle makes the running controller sync its snapshot and its statuses
// once more and waits for both: what it would do about the current state
// is then done.
func (e *env) settle() {
	t := e.t
	t.Helper()
	e.run.mu.Lock()
	ctl := e.run.ctl
	e.run.mu.Unlock()
	for _, l := range []struct {
		name string
		d    *debouncer
	}{{"structure", ctl.structure}, {"status", ctl.status}} {
		n := e.syncCount(l.name)
		l.d.Trigger()
		waitFor(t, waitLong, "a "+l.name+" sync", func() (bool, string) {
			return e.syncCount(l.name) > n, fmt.Sprint(l.name, " syncs ", e.syncCount(l.name))
		})
	}
}

// revisions lists the installed revisions.
func (e *env) revisions() []int {
	l, err := e.layout.Defaulted().List(revisions.OS())
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Revisions
}

// waitRevision waits until revision n is the highest installed.
func (e *env) waitRevision(n int) {
	e.t.Helper()
	waitFor(e.t, waitLong, fmt.Sprintf("revision %d", n), func() (bool, string) {
		revs := e.revisions()
		return len(revs) > 0 && revs[len(revs)-1] == n, fmt.Sprint("revisions ", revs)
	})
}

// revisionFile reads a file of revision n.
func (e *env) revisionFile(n int, rel string) string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.layout.RevisionDir(n), filepath.FromSlash(rel)))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) createService(name string, addrs ...string) {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := e.c.client.CoreV1().Services(e.ns).Create(e.ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	sl := sliceObj(e.ns, name+"-1", name, addrs...)
	for i := range sl.Endpoints {
		sl.Endpoints[i].TargetRef = nil
	}
	if _, err := e.c.client.DiscoveryV1().EndpointSlices(e.ns).Create(e.ctx(), sl, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// setEndpoints replaces the endpoints of a Service's slice.
func (e *env) setEndpoints(service string, addrs ...string) {
	e.t.Helper()
	sl, err := e.c.client.DiscoveryV1().EndpointSlices(e.ns).Get(e.ctx(), service+"-1", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	sl.Endpoints = nil
	for _, a := range addrs {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	if _, err := e.c.client.DiscoveryV1().EndpointSlices(e.ns).Update(e.ctx(), sl, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createIngress(name, host, service string) *networkingv1.Ingress {
	e.t.Helper()
	ing := ingressObj(e.ns, name, e.class, host, service, "")
	got, err := e.c.client.NetworkingV1().Ingresses(e.ns).Create(e.ctx(), ing, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// editIngress applies edit to the current Ingress and updates it.
func (e *env) editIngress(name string, edit func(*networkingv1.Ingress)) {
	e.t.Helper()
	for {
		ing, err := e.c.client.NetworkingV1().Ingresses(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		edit(ing)
		_, err = e.c.client.NetworkingV1().Ingresses(e.ns).Update(e.ctx(), ing, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

// ingressAddresses is an Ingress's status.loadBalancer.ingress, as "ip" or
// "hostname" strings.
func (e *env) ingressAddresses(name string) []string {
	ing, err := e.c.client.NetworkingV1().Ingresses(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, a := range ing.Status.LoadBalancer.Ingress {
		out = append(out, a.IP+a.Hostname)
	}
	return out
}

// events lists the Events of namespace ns about object name with reason.
func (e *env) events(ns, name, reason string) []corev1.Event {
	sel := fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()
	list, err := e.c.client.CoreV1().Events(ns).List(e.ctx(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// waitEvent waits for an Event about an object and returns it.
func (e *env) waitEvent(ns, name, reason string) corev1.Event {
	e.t.Helper()
	var ev corev1.Event
	waitFor(e.t, waitLong, fmt.Sprintf("Event %s on %s/%s", reason, ns, name), func() (bool, string) {
		evs := e.events(ns, name, reason)
		if len(evs) == 0 {
			return false, "none"
		}
		ev = evs[0]
		return true, ""
	})
	return ev
}

// ingressFile is the rendered file of an Ingress in revision n.
func (e *env) ingressFile(n int, name string) string {
	return e.revisionFile(n, installer.ConfigMapsDir+"/"+folderIngresses+"/"+objectFile(e.ns, name))
}

// createTLSSecret creates a kubernetes.io/tls Secret in the env's namespace.
func createTLSSecret(t *testing.T, e *env, name string, crt, key []byte) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
	if _, err := e.c.client.CoreV1().Secrets(e.ns).Create(e.ctx(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var metav1Create = metav1.CreateOptions{}

func itoa(n int) string { return strconv.Itoa(n) }

// readPod parses a pod manifest.
func readPod(path string) (*corev1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, err
	}
	return &pod, nil
}

// copyRevision copies revision from's folder as revision to, with its
// manifests' revision labels and paths changed as the installer would
// render them.
func copyRevision(l revisions.Layout, from, to int) error {
	src, dst := l.RevisionDir(from), l.RevisionDir(to)
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.Dir(rel) == "." {
			s := strings.ReplaceAll(string(data), l.RevisionDirName(from), l.RevisionDirName(to))
			s = strings.ReplaceAll(s, "revision: \""+itoa(from)+"\"", "revision: \""+itoa(to)+"\"")
			s = strings.ReplaceAll(s, "--revision="+itoa(from), "--revision="+itoa(to))
			data = []byte(s)
		}
		fi, _ := d.Info()
		return os.WriteFile(target, data, fi.Mode().Perm())
	})
}
