// Command controller is the cluster loop's benchmark driver (run by
// hack/bench/controller.sh): on a real etcd and kube-apiserver, with
// `revgate supervise` running the gateway and `revgate controller` cutting
// its revisions, it measures
//
//   - apply-to-served latency: from creating an Ingress to the gateway
//     answering its host from the upstream, p50 and p95, in a small cluster
//     and beside -ingresses Ingresses;
//   - the initial sync with -ingresses Ingresses: from the controller's start
//     to the revision installed, to the gateway serving it, and to every
//     Ingress's status written; the controller's RSS then;
//   - endpoint churn: -churn of EndpointSlice updates at -churn-rate per
//     second, the revisions cut meanwhile (target 0) and the requests that
//     failed under a steady client.
//
// It prints a Markdown table. Timings are measured, never asserted.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/revgate/revgate/internal/kubetest"
	"github.com/revgate/revgate/revisions"
)

var (
	revgateBin = flag.String("revgate", "", "revgate binary (required)")
	ingresses  = flag.Int("ingresses", 10000, "Ingresses of the large cluster")
	samples    = flag.Int("samples", 10, "apply-to-served samples per cluster size")
	churnFor   = flag.Duration("churn", time.Minute, "how long to churn endpoints")
	churnRate  = flag.Int("churn-rate", 10, "EndpointSlice updates per second while churning")
	workDir    = flag.String("work", "", "work folder (default: a temporary one, removed)")
	ctlArgs    = flag.String("controller-args", "", "extra arguments of revgate controller, space-separated")
)

const ns = "bench"

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *revgateBin == "" {
		log.Fatal("-revgate is required")
	}
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// bench is one run's world.
type bench struct {
	dir       string
	layout    revisions.Layout
	client    kubernetes.Interface
	kubeconf  string
	ip        string
	up        [2]string // upstream addresses: A, B
	httpAddr  string
	adminAddr string
	procs     []*exec.Cmd
	ctl       *exec.Cmd
}

func run() error {
	dir := *workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "revgate-controller-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	log.Printf("starting etcd and kube-apiserver")
	srv, err := kubetest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := &bench{dir: dir, client: client, kubeconf: srv.KubeconfigFile()}
	defer b.stopAll()
	b.layout = revisions.Layout{
		Target:         "revgate",
		ResourceDir:    filepath.Join(dir, "resources"),
		ManifestsDir:   filepath.Join(dir, "manifests"),
		LockFile:       filepath.Join(dir, "revgate.lock"),
		TerminationLog: filepath.Join(dir, "log", "termination.log"),
	}
	for _, d := range []string{b.layout.ResourceDir, b.layout.ManifestsDir, filepath.Dir(b.layout.TerminationLog)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if b.ip, err = hostIP(); err != nil {
		return err
	}
	for i, name := range []string{"A", "B"} {
		if b.up[i], err = serveUpstream(b.ip, name); err != nil {
			return err
		}
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := b.service(ctx, "up", b.up[0]); err != nil {
		return err
	}
	if err := b.startSupervise(); err != nil {
		return err
	}
	var rows [][2]string

	// A small cluster: a few Ingresses.
	log.Printf("small cluster: apply-to-served samples")
	if err := b.createIngresses(ctx, "small", 10); err != nil {
		return err
	}
	if err := b.startController(); err != nil {
		return err
	}
	if err := b.waitServed("small-00009.bench.local", 5*time.Minute); err != nil {
		return err
	}
	small, err := b.applySamples(ctx, "s", *samples)
	if err != nil {
		return err
	}
	rows = append(rows, [2]string{"apply-to-served, 10 Ingresses (p50 / p95)", percentiles(small)})

	// The large cluster, synced by a fresh controller.
	b.stopController()
	log.Printf("creating %d Ingresses", *ingresses)
	start := time.Now()
	if err := b.createIngresses(ctx, "ing", *ingresses); err != nil {
		return err
	}
	log.Printf("created in %s", time.Since(start).Round(time.Second))
	before := b.highest()
	start = time.Now()
	if err := b.startController(); err != nil {
		return err
	}
	last := fmt.Sprintf("ing-%05d.bench.local", *ingresses-1)
	for b.highest() == before {
		if time.Since(start) > 15*time.Minute {
			return errors.New("no revision after 15m")
		}
		time.Sleep(50 * time.Millisecond)
	}
	installed := time.Since(start)
	if err := b.waitServed(last, 15*time.Minute); err != nil {
		return err
	}
	served := time.Since(start)
	rssServed := rssMB(b.ctl.Process.Pid, "VmRSS")
	statuses, err := b.waitStatuses(ctx, 30*time.Minute)
	if err != nil {
		return err
	}
	statusesDone := time.Since(start)
	rows = append(rows,
		[2]string{fmt.Sprintf("initial sync, %d Ingresses: start → revision installed", *ingresses), seconds(installed)},
		[2]string{"… → gateway serving it", seconds(served)},
		[2]string{fmt.Sprintf("… → every Ingress status written (%d)", statuses), seconds(statusesDone)},
		[2]string{"controller RSS when served / after the status writes / peak", fmt.Sprintf("%d / %d / %d MB", rssServed, rssMB(b.ctl.Process.Pid, "VmRSS"), rssMB(b.ctl.Process.Pid, "VmHWM"))},
		[2]string{"gateway RSS", fmt.Sprintf("%d MB", b.gatewayRSS())},
	)
	log.Printf("large cluster: apply-to-served samples")
	large, err := b.applySamples(ctx, "l", *samples)
	if err != nil {
		return err
	}
	rows = append(rows, [2]string{fmt.Sprintf("apply-to-served, %d Ingresses (p50 / p95)", *ingresses), percentiles(large)})

	log.Printf("endpoint churn: %s at %d updates/s", *churnFor, *churnRate)
	cut, updates, total, failed, byUp, err := b.churn(ctx)
	if err != nil {
		return err
	}
	rows = append(rows,
		[2]string{fmt.Sprintf("revisions cut by %d EndpointSlice updates in %s (target 0)", updates, *churnFor), strconv.Itoa(cut)},
		[2]string{"requests during the churn: failed / total (answers A, B)", fmt.Sprintf("%d / %d (%d, %d)", failed, total, byUp["A"], byUp["B"])},
	)

	fmt.Println("| measure | value |")
	fmt.Println("|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s |\n", r[0], r[1])
	}
	return nil
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func percentiles(ds []time.Duration) string {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1)+0.5)] }
	return fmt.Sprintf("%.2f s / %.2f s", at(0.5).Seconds(), at(0.95).Seconds())
}

// hostIP is a non-loopback IPv4 address: the API server refuses loopback
// addresses in EndpointSlices.
func hostIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("no non-loopback IPv4 address for the upstreams")
}

// serveUpstream answers every request with 200 and its name.
func serveUpstream(ip, name string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, name+"\n")
		}))
	}()
	return ln.Addr().String(), nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (b *bench) spawn(name string, args ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(filepath.Join(b.dir, "log", name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(*revgateBin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.procs = append(b.procs, cmd)
	return cmd, nil
}

func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func (b *bench) stopAll() {
	for i := len(b.procs) - 1; i >= 0; i-- {
		stop(b.procs[i])
	}
}

func (b *bench) startSupervise() error {
	_, err := b.spawn("supervise", "supervise", "--manifests-dir="+b.layout.ManifestsDir, "--relist-period=1s", "--remove-delay=500ms")
	return err
}

// startController runs `revgate controller`; the gateway's addresses are
// chosen once, so that every controller renders the same pods.
func (b *bench) startController() error {
	if b.httpAddr == "" {
		var err error
		if b.httpAddr, err = freeAddr(); err != nil {
			return err
		}
		if b.adminAddr, err = freeAddr(); err != nil {
			return err
		}
	}
	args := []string{"controller",
		"--kubeconfig=" + b.kubeconf,
		"--node-name=bench-node",
		"--namespaces=" + ns,
		"--publish-address=192.0.2.1",
		"--target=" + b.layout.Target,
		"--resource-dir=" + b.layout.ResourceDir,
		"--manifests-dir=" + b.layout.ManifestsDir,
		"--lock-file=" + b.layout.LockFile,
		"--termination-log=" + b.layout.TerminationLog,
		"--binary=" + *revgateBin,
		"--proxy-arg=--http-addr=" + b.httpAddr,
		"--proxy-arg=--https-addr=",
		"--proxy-arg=--admin-addr=" + b.adminAddr,
	}
	if *ctlArgs != "" {
		args = append(args, strings.Fields(*ctlArgs)...)
	}
	var err error
	b.ctl, err = b.spawn("controller", args...)
	return err
}

func (b *bench) stopController() {
	stop(b.ctl)
	b.ctl = nil
}

func (b *bench) highest() int {
	l, err := b.layout.List(revisions.OS())
	if err != nil {
		return 0
	}
	return l.Highest()
}

// service creates a Service and its EndpointSlice.
func (b *bench) service(ctx context.Context, name, addr string) error {
	_, err := b.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = b.client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice(name, addr), metav1.CreateOptions{})
	return err
}

// slice is the EndpointSlice of a Service with the given upstreams (all on
// one port).
func slice(service string, addrs ...string) *discoveryv1.EndpointSlice {
	pname, port := "http", int32(0)
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, a := range addrs {
		host, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		port = int32(n)
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{host}})
	}
	sl.Ports = []discoveryv1.EndpointPort{{Name: &pname, Port: &port}}
	return sl
}

func ingress(name, host string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	class := "revgate"
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "up", Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
}

// createIngresses creates n Ingresses <prefix>-NNNNN for hosts
// <prefix>-NNNNN.bench.local, with a few workers.
func (b *bench) createIngresses(ctx context.Context, prefix string, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				name := fmt.Sprintf("%s-%05d", prefix, i)
				if _, err := b.client.NetworkingV1().Ingresses(ns).Create(ctx, ingress(name, name+".bench.local"), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

var httpClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// answer asks the gateway for host; it returns the upstream's name, or "".
func (b *bench) answer(host string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+b.httpAddr+"/", nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d %v", resp.StatusCode, err)
	}
	return strings.TrimSpace(string(body)), nil
}

func (b *bench) waitServed(host string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if name, err := b.answer(host); err == nil && name != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not served after %s", host, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGood waits until the highest revision is last-known-good and its
// startup monitor is gone: the next sample starts from a settled node.
func (b *bench) waitGood(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		lkg, err := b.layout.LastKnownGood(revisions.OS())
		_, mon := os.Stat(b.layout.PublishedMonitorManifest())
		if err == nil && lkg == b.highest() && errors.Is(mon, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("revision %d not good after %s (last-known-good %d)", b.highest(), limit, lkg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// applySamples creates n Ingresses one at a time and times each from the
// create call to the gateway answering its host.
func (b *bench) applySamples(ctx context.Context, prefix string, n int) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n; i++ {
		if err := b.waitGood(10 * time.Minute); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("new-%s-%02d", prefix, i)
		start := time.Now()
		if _, err := b.client.NetworkingV1().Ingresses(ns).Create(ctx, ingress(name, name+".bench.local"), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		if err := b.waitServed(name+".bench.local", 10*time.Minute); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		log.Printf("sample %s: %s", name, out[len(out)-1].Round(time.Millisecond))
	}
	return out, nil
}

// waitStatuses waits until every Ingress carries an address and returns
// how many there are.
func (b *bench) waitStatuses(ctx context.Context, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		list, err := b.client.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
		done := 0
		if err == nil {
			for _, ing := range list.Items {
				if len(ing.Status.LoadBalancer.Ingress) > 0 {
					done++
				}
			}
			if done == len(list.Items) {
				return done, nil
			}
		}
		if time.Now().After(deadline) {
			return done, fmt.Errorf("%d statuses written after %s", done, limit)
		}
		time.Sleep(time.Second)
	}
}

// churn flips the Service's slice between [A] and [A, B] at churnRate while
// a client asks the gateway for one host; it returns the revisions cut, the
// updates made, and what the client saw.
func (b *bench) churn(ctx context.Context) (cut, updates, total, failed int, byUp map[string]int, err error) {
	if err := b.waitGood(10 * time.Minute); err != nil {
		return 0, 0, 0, 0, nil, err
	}
	before := b.highest()
	stopLoad := make(chan struct{})
	var mu sync.Mutex
	byUp = map[string]int{}
	var loadWG sync.WaitGroup
	for w := 0; w < 2; w++ {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				name, err := b.answer("ing-00000.bench.local")
				mu.Lock()
				total++
				if err != nil {
					failed++
				} else {
					byUp[name]++
				}
				mu.Unlock()
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(*churnRate))
	end := time.Now().Add(*churnFor)
	for time.Now().Before(end) {
		<-tick.C
		addrs := []string{b.up[0]}
		if updates%2 == 0 {
			addrs = append(addrs, b.up[1])
		}
		cur, gerr := b.client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "up-1", metav1.GetOptions{})
		if gerr != nil {
			err = gerr
			break
		}
		next := slice("up", addrs...)
		next.ResourceVersion = cur.ResourceVersion
		if _, uerr := b.client.DiscoveryV1().EndpointSlices(ns).Update(ctx, next, metav1.UpdateOptions{}); uerr != nil {
			err = uerr
			break
		}
		updates++
	}
	tick.Stop()
	time.Sleep(3 * time.Second)
	close(stopLoad)
	loadWG.Wait()
	return b.highest() - before, updates, total, failed, byUp, err
}

// rssMB reads a VmRSS-like field of a process, in MB.
func rssMB(pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb / 1024
		}
	}
	return 0
}

// gatewayRSS is the RSS of the proxy process serving the highest revision.
func (b *bench) gatewayRSS() int {
	want := "--config-dir=" + b.layout.RevisionDir(b.highest())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), want+"\x00") {
			return rssMB(pid, "VmRSS")
		}
	}
	return 0
}
