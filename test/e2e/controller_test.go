package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/controller"
	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

// hostIP returns a non-loopback IPv4 address of this machine: the API server
// refuses loopback addresses in EndpointSlices, so the upstreams of the
// cluster scenarios listen on it.
func hostIP(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	t.Fatal("no non-loopback IPv4 address for the upstreams")
	return ""
}

// startHostUpstream serves demo.Handler(name) on ip, on a port the kernel
// hands out.
func startHostUpstream(t *testing.T, name, ip string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u := &upstream{name: name, addr: addr}
	u.start(t)
	t.Cleanup(u.stop)
	return u
}

// cluster is the Kubernetes side of a cluster scenario: one namespace of
// the shared API server and a `revgate controller` process.
type cluster struct {
	t      *testing.T
	e      *env
	client kubernetes.Interface
	ns     string
	args   []string

	mu      sync.Mutex
	ctl     *exec.Cmd
	ctlDone <-chan struct{}
}

// publishAddress is what the scenarios' controllers publish in Ingress status.
const publishAddress = "192.0.2.50"

func newCluster(t *testing.T, e *env) *cluster {
	t.Helper()
	client, ns := newNamespace(t)
	return newNode(t, e, client, ns, "e2e-node")
}

// apiServer lets the cluster scenarios run in parallel on the shared API
// server while one of them stops it: every scenario holds it for reading
// while it runs (newNamespace), and apiOutage holds it for writing.
var apiServer sync.RWMutex

// apiOutage stops the shared API server for d and calls during before
// starting it again. It waits for the other cluster scenarios to end, and
// those starting meanwhile wait for it: no other scenario sees the outage.
// t holds the server for reading (newNamespace).
func apiOutage(t *testing.T, d time.Duration, during func()) {
	t.Helper()
	apiServer.RUnlock()
	apiServer.Lock()
	kubetest.StopAPIServer(t)
	defer func() {
		kubetest.StartAPIServer(t)
		apiServer.Unlock()
		apiServer.RLock()
	}()
	time.Sleep(d)
	during()
}

// newNamespace creates a namespace of the shared API server for the
// scenario, named after the test, and holds the server for reading until
// the test ends.
func newNamespace(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	apiServer.RLock()
	t.Cleanup(apiServer.RUnlock)
	client, err := kubernetes.NewForConfig(kubetest.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return client, ns
}

// newNode sets up the controller of node e, named node, watching namespace
// ns (not started).
func newNode(t *testing.T, e *env, client kubernetes.Interface, ns, node string) *cluster {
	t.Helper()
	c := &cluster{t: t, e: e, client: client, ns: ns}
	c.args = append([]string{"controller",
		"--kubeconfig=" + kubetest.Kubeconfig(t),
		"--node-name=" + node,
		"--namespaces=" + ns,
		"--publish-address=" + publishAddress,
		"--sync-quiet-period=200ms",
		"--sync-max-delay=2s",
	}, e.installArgs()...)
	t.Cleanup(func() {
		c.stopController()
		if t.Failed() {
			if data, err := os.ReadFile(c.logPath()); err == nil {
				if len(data) > 12000 {
					data = data[len(data)-12000:]
				}
				t.Logf("controller log of %s (tail):\n%s", node, data)
			}
		}
	})
	return c
}

// logPath is the controller's log file.
func (c *cluster) logPath() string { return filepath.Join(c.e.root, "log", "controller.log") }

// startController runs `revgate controller`, logging to log/controller.log.
func (c *cluster) startController() {
	c.t.Helper()
	f, err := os.OpenFile(c.logPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(revgateBin, c.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done := startWatched(c.t, "controller", cmd)
	c.mu.Lock()
	c.ctl, c.ctlDone = cmd, done
	c.mu.Unlock()
}

// stopController stops the controller with SIGTERM.
func (c *cluster) stopController() { c.signalController(syscall.SIGTERM) }

// signalController sends the controller sig and waits for it to exit;
// SIGKILL simulates a crash.
func (c *cluster) signalController(sig syscall.Signal) {
	c.mu.Lock()
	cmd, done := c.ctl, c.ctlDone
	c.ctl = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	signalAndWait(c.t, "the controller", cmd, done, sig, 30*time.Second)
}

// controllerRunning reports whether the controller process is alive.
func (c *cluster) controllerRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctl == nil {
		return false
	}
	select {
	case <-c.ctlDone:
		return false
	default:
		return true
	}
}

func (c *cluster) ctx() context.Context { return context.Background() }

// service creates a Service and its EndpointSlice <name>-1 with upstream u.
func (c *cluster) service(name string, u *upstream) {
	c.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := c.client.CoreV1().Services(c.ns).Create(c.ctx(), svc, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.addSlice(name, name+"-1", u)
}

// addSlice adds an EndpointSlice of a Service with one upstream: the
// upstreams listen on ports of their own, and a slice has one port list.
func (c *cluster) addSlice(service, name string, u *upstream) {
	c.t.Helper()
	host, p, _ := net.SplitHostPort(u.addr)
	n, _ := strconv.Atoi(p)
	pname, port := "http", int32(n)
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: c.ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port}},
	}
	if _, err := c.client.DiscoveryV1().EndpointSlices(c.ns).Create(c.ctx(), sl, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// deleteSlice removes an EndpointSlice, as the EndpointSlice controller
// does when the last pod behind it goes.
func (c *cluster) deleteSlice(name string) {
	c.t.Helper()
	if err := c.client.DiscoveryV1().EndpointSlices(c.ns).Delete(c.ctx(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// ingress creates or updates an Ingress of class revgate routing host
// ("" for any) to a Service.
func (c *cluster) ingress(name, host, service string) {
	c.t.Helper()
	pt := networkingv1.PathTypePrefix
	class := "revgate"
	spec := networkingv1.IngressSpec{
		IngressClassName: &class,
		Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: 80}},
			}}},
		}}}},
	}
	ings := c.client.NetworkingV1().Ingresses(c.ns)
	for {
		cur, err := ings.Get(c.ctx(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = ings.Create(c.ctx(), &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns}, Spec: spec}, metav1.CreateOptions{})
		} else if err == nil {
			cur.Spec = spec
			_, err = ings.Update(c.ctx(), cur, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		return
	}
}

// addresses is an Ingress's status.loadBalancer.ingress.
func (c *cluster) addresses(name string) []string {
	ing, err := c.client.NetworkingV1().Ingresses(c.ns).Get(c.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, a := range ing.Status.LoadBalancer.Ingress {
		out = append(out, a.IP+a.Hostname)
	}
	return out
}

// revisions lists the installed revisions.
func (c *cluster) revisions() []int {
	l, err := c.e.layout.List(revisions.OS())
	if err != nil {
		c.t.Fatal(err)
	}
	return l.Revisions
}

// TestClusterLoop drives `revgate controller` and `revgate supervise` with a
// real API server, real processes and real sockets: creating an Ingress
// serves it; editing it cuts one revision; a broken Ingress gets an Event
// and no address while the healthy one keeps serving; a restarted
// controller cuts no revision; EndpointSlices scaled up and down change the
// answering upstreams without a revision; an API server stopped for 30 s
// loses no request, and the controller picks up changes once it is back.
// Clients send requests throughout, and none may fail.
func TestClusterLoop(t *testing.T) {
	t.Parallel()
	ip := hostIP(t)
	e := newEnv(t)
	c := newCluster(t, e)
	v1, v2 := startHostUpstream(t, "v1", ip), startHostUpstream(t, "v2", ip)
	c.service("web", v1)
	c.service("web2", v2)
	c.ingress("web", "", "web")
	e.startSupervise()
	c.startController()
	start := time.Now()
	step := func(what string) { t.Logf("%5.1fs step: %s", time.Since(start).Seconds(), what) }

	step("the Ingress created before the controller started is served")
	e.waitGood(1, "v1")
	waitFor(t, waitLong, "the Ingress's address", func() (bool, string) {
		got := c.addresses("web")
		return reflect.DeepEqual(got, []string{publishAddress}), strings.Join(got, ",")
	})
	stop := make(chan struct{})
	results := e.load(loadWorkers, stop)

	step("an edit cuts one revision")
	c.ingress("web", "", "web2")
	e.waitGood(2, "v2")
	time.Sleep(3 * time.Second) // longer than --sync-max-delay
	if revs := c.revisions(); !reflect.DeepEqual(revs, []int{1, 2}) {
		t.Fatalf("revisions %v after one edit", revs)
	}

	step("a broken Ingress is installed, reported, and the healthy one keeps serving")
	c.ingress("broken", "broken.example", "missing")
	e.waitGood(3, "v2")
	waitFor(t, waitLong, "an Event on the broken Ingress", func() (bool, string) {
		evs, err := c.client.CoreV1().Events(c.ns).List(c.ctx(), metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "broken", "reason": controller.EventTranslationFailed}.AsSelector().String()})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		return strings.Contains(evs.Items[0].Message, "service "+c.ns+"/missing not found"), evs.Items[0].Message
	})
	if got := c.addresses("broken"); len(got) != 0 {
		t.Errorf("the broken Ingress has addresses %v", got)
	}
	if got := c.addresses("web"); !reflect.DeepEqual(got, []string{publishAddress}) {
		t.Errorf("the healthy Ingress has addresses %v", got)
	}

	step("a restarted controller cuts no revision")
	c.stopController()
	c.startController()
	time.Sleep(5 * time.Second)
	if revs := c.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
		t.Fatalf("revisions %v after a restart", revs)
	}

	step("scaling the Service's EndpointSlices up and down changes the answering upstreams without a revision")
	v3 := startHostUpstream(t, "v3", ip)
	up := time.Now()
	c.addSlice("web2", "web2-2", v3)
	t.Logf("scale-up answered after %s", e.waitAnswer(t, "v3", up).Round(time.Millisecond))
	e.waitLiveEndpoints(t, v2.addr, v3.addr)
	down := time.Now()
	c.deleteSlice("web2-1")
	e.waitLiveEndpoints(t, v3.addr)
	t.Logf("scale-down applied after %s", time.Since(down).Round(time.Millisecond))
	for i := 0; i < 10; i++ {
		if r := get("http://" + e.httpAddr + "/after"); r.err != nil || r.status != http.StatusOK || !strings.HasPrefix(r.body, "v3 ") {
			t.Fatalf("after scaling down: %d %q %v", r.status, r.body, r.err)
		}
	}
	if revs := c.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
		t.Fatalf("revisions %v: endpoint changes cut revisions", revs)
	}

	step("the API server stops for 30 s")
	apiOutage(t, 30*time.Second, func() {
		if !c.controllerRunning() {
			t.Fatal("the controller exited while the API server was away")
		}
		if ok, detail := e.serving(3, "v3"); !ok {
			t.Fatalf("the gateway stopped serving during the outage: %s", detail)
		}
	})

	step("once it is back, a change is served")
	c.ingress("web", "", "web")
	e.waitGood(4, "v1")
	if revs := c.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3, 4}) {
		t.Fatalf("revisions %v: the outage cut revisions", revs)
	}
	step("done")
	close(stop)
	res := <-results
	checkLoad(t, "cluster-loop", res)
	for _, name := range []string{"v1", "v2", "v3"} {
		if res.bodies[name] == 0 {
			t.Errorf("answers by upstream %v: want v1, v2 and v3 to have served", res.bodies)
		}
	}
}

// Regression: when a served Service's last EndpointSlice went (scaled to
// zero, slices deleted), the live endpoints file held no slice of it, and
// by the file's rules the gateway went back to the endpoints of its
// revision, sending requests to an upstream the cluster no longer lists.
// The controller writes an empty slice for it: the gateway answers 503
// until a slice is back, without a revision.
func TestServiceScaledToZero(t *testing.T) {
	t.Parallel()
	ip := hostIP(t)
	e := newEnv(t)
	c := newCluster(t, e)
	v1 := startHostUpstream(t, "v1", ip)
	c.service("web", v1)
	c.ingress("web", "", "web")
	e.startSupervise()
	c.startController()
	e.waitGood(1, "v1")

	c.deleteSlice("web-1")
	e.waitLiveEndpoints(t)
	waitFor(t, waitLong, "503 from the gateway", func() (bool, string) {
		r := get("http://" + e.httpAddr + "/hello")
		return r.err == nil && r.status == http.StatusServiceUnavailable, fmt.Sprintf("%d %q %v", r.status, r.body, r.err)
	})

	c.addSlice("web", "web-2", v1)
	e.waitLiveEndpoints(t, v1.addr)
	if ok, detail := e.serving(1, "v1"); !ok {
		t.Fatalf("with a slice back: %s", detail)
	}
	if revs := c.revisions(); !reflect.DeepEqual(revs, []int{1}) {
		t.Fatalf("revisions %v: endpoint changes cut revisions", revs)
	}
}
