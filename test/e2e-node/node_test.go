package e2enode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/monitor"
	"github.com/revgate/revgate/revisions"
)

// The gateway's listeners on the host (the rendered pods use hostNetwork):
// free loopback ports chosen at start rather than the proxy's defaults
// (:8080, :8443, 127.0.0.1:9901), which other suites on a shared machine may
// hold. The installer points the pods' probes and the monitor at the admin
// address given with --proxy-arg=--admin-addr.
var (
	httpAddr, httpsAddr, adminAddr string
	gatewayURL, adminURL           string
)

// pickGatewayPorts chooses the gateway's listener addresses.
func pickGatewayPorts() error {
	var addrs []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	httpAddr, httpsAddr, adminAddr = addrs[0], addrs[1], addrs[2]
	gatewayURL, adminURL = "http://"+httpAddr, "http://"+adminAddr
	return nil
}

// Timeouts of the monitors the tests install. The kubelet takes 10-15 s to
// replace a static pod in place, so a good revision needs most of the
// fallback timeout on a loaded machine.
const (
	fallbackTimeout = 40 * time.Second
	retryInitial    = 20 * time.Second
	// waitLong bounds one wait: a fallback decision plus the kubelet putting
	// the old pod back, with room for a slow machine.
	waitLong = 3 * time.Minute
)

// node is the running test node, nil when the suite skips.
var (
	node       *nodeEnv
	skipReason string
)

// nodeEnv is what hack/node/up.sh wrote to $NODE_ROOT/env, plus a client.
type nodeEnv struct {
	vars map[string]string
	repo string
	name string
	bin  string // the host's revgate
	// kubeconfig is the admin kubeconfig on the host, also given to the
	// startup monitor (install --monitor-kubeconfig mounts it into its pod).
	kubeconfig string
	layout     revisions.Layout
	client     kubernetes.Interface
	upSeconds  float64
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("REVGATE_E2E_NODE") != "1" {
		skipReason = "single-node cluster suite: set REVGATE_E2E_NODE=1 to run it (root; hack/node/up.sh installs containerd, runc and etcd and builds the kubelet)"
		return m.Run()
	}
	repo, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node:", err)
		return 1
	}
	if err := pickGatewayPorts(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node:", err)
		return 1
	}
	nodeRoot := os.Getenv("NODE_ROOT")
	if nodeRoot == "" {
		nodeRoot = "/tmp/revgate-node"
	}
	if _, err := os.Stat(filepath.Join(nodeRoot, "env")); err == nil {
		fmt.Fprintf(os.Stderr, "e2e-node: stopping a node left in %s by an earlier run\n", nodeRoot)
		_ = script(repo, nodeRoot, "down.sh")
	}
	// The node's servers outlive this process: take them down on an
	// interrupt and before `go test -timeout` would kill the binary.
	var downOnce sync.Once
	down := func() error {
		err := errors.New("already stopped")
		downOnce.Do(func() { err = script(repo, nodeRoot, "down.sh") })
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "e2e-node: %v: stopping the node\n", s)
		_ = down()
		os.Exit(1)
	}()
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			margin := min(time.Minute, d/10)
			time.AfterFunc(d-margin, func() {
				fmt.Fprintf(os.Stderr, "e2e-node: the -timeout of %s is about to end the tests: stopping the node (the suite needs about 12 minutes; run it with -timeout 20m)\n", d)
				_ = down()
				os.Exit(1)
			})
		}
	}

	start := time.Now()
	if err := script(repo, nodeRoot, "up.sh"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node: hack/node/up.sh:", err)
		_ = down()
		return 1
	}
	up := time.Since(start)
	node, err = loadNode(repo, nodeRoot)
	if err == nil {
		fmt.Fprintf(os.Stderr, "e2e-node: node %s up in %.1fs (up.sh; %s s by its own clock)\n", node.name, up.Seconds(), node.vars["UP_SECONDS"])
		node.upSeconds = up.Seconds()
	}
	code := 1
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node:", err)
	} else {
		code = m.Run()
	}
	stopUpstreams()
	if os.Getenv("REVGATE_E2E_NODE_KEEP") == "1" {
		fmt.Fprintf(os.Stderr, "e2e-node: node left running in %s (hack/node/down.sh stops it)\n", nodeRoot)
		return code
	}
	if err := down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-node: hack/node/down.sh:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// script runs hack/node/<name> with its output on stderr.
func script(repo, nodeRoot, name string, args ...string) error {
	cmd := exec.Command("bash", append([]string{filepath.Join(repo, "hack", "node", name)}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_ROOT="+nodeRoot)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the test's source")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	return vars, sc.Err()
}

func loadNode(repo, nodeRoot string) (*nodeEnv, error) {
	vars, err := readEnvFile(filepath.Join(nodeRoot, "env"))
	if err != nil {
		return nil, fmt.Errorf("read the node's env file: %w", err)
	}
	for _, k := range []string{"NODE_NAME", "REVGATE_BIN", "KUBECONFIG_PATH", "RESOURCE_DIR", "STATIC_POD_PATH", "LOCK_FILE", "TERMINATION_LOG"} {
		if vars[k] == "" {
			return nil, fmt.Errorf("the node's env file lacks %s", k)
		}
	}
	n := &nodeEnv{
		vars: vars, repo: repo, name: vars["NODE_NAME"], bin: vars["REVGATE_BIN"], kubeconfig: vars["KUBECONFIG_PATH"],
		layout: revisions.Layout{
			Target:         revisions.DefaultTarget,
			ResourceDir:    vars["RESOURCE_DIR"],
			ManifestsDir:   vars["STATIC_POD_PATH"],
			LockFile:       vars["LOCK_FILE"],
			TerminationLog: vars["TERMINATION_LOG"],
		},
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", n.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", n.kubeconfig, err)
	}
	n.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// requireNode skips the test when the suite does not run.
func requireNode(t *testing.T) *nodeEnv {
	t.Helper()
	if node == nil {
		t.Skip(skipReason)
	}
	return node
}

// mirrorPodName is the name of the operand's mirror pod.
func (n *nodeEnv) mirrorPodName() string { return n.layout.Target + "-" + n.name }

// revgate runs the host's revgate binary.
func (n *nodeEnv) revgate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.bin, args...).CombinedOutput()
	return string(out), err
}

// installSpec is one revision to install.
type installSpec struct {
	source string
	// proxyArgs and monitorArgs are extra arguments of the rendered commands.
	proxyArgs, monitorArgs []string
	// mutate changes the written revision before it is published; the
	// revision is then installed with --no-publish and published here the
	// way the installer does it.
	mutate func(t *testing.T, revDir string)
}

var revisionRE = regexp.MustCompile(`revision (\d+)`)

// install installs a revision into the kubelet's staticPodPath and returns
// its number and when it was published.
func (n *nodeEnv) install(t *testing.T, s installSpec) (int, time.Time) {
	t.Helper()
	args := []string{"install",
		"--source-dir=" + s.source,
		"--resource-dir=" + n.layout.ResourceDir,
		"--manifests-dir=" + n.layout.ManifestsDir,
		"--lock-file=" + n.layout.LockFile,
		"--termination-log=" + n.layout.TerminationLog,
		"--binary=/revgate",
		"--image=revgate:e2e",
		"--image-pull-policy=Never",
		"--monitor-kubeconfig=" + n.kubeconfig,
	}
	monitorArgs := append([]string{
		"--node-name=" + n.name,
		"--fallback-timeout=" + fallbackTimeout.String(),
		"--probe-interval=500ms",
		"--retry-initial=" + retryInitial.String(),
		"--retry-max=1m",
	}, s.monitorArgs...)
	for _, a := range monitorArgs {
		args = append(args, "--monitor-arg="+a)
	}
	proxyArgs := append([]string{"--http-addr=" + httpAddr, "--https-addr=" + httpsAddr, "--admin-addr=" + adminAddr}, s.proxyArgs...)
	for _, a := range proxyArgs {
		args = append(args, "--proxy-arg="+a)
	}
	if s.mutate != nil {
		args = append(args, "--no-publish")
	}
	out, err := n.revgate(t, args...)
	if err != nil {
		t.Fatalf("revgate install: %v\n%s", err, out)
	}
	m := revisionRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no revision in the installer's output:\n%s", out)
	}
	rev, _ := strconv.Atoi(m[1])
	if s.mutate == nil {
		return rev, time.Now()
	}
	s.mutate(t, n.layout.RevisionDir(rev))
	e2etest.Publish(t, n.layout, rev)
	return rev, time.Now()
}

// published returns the revision and annotations of the published operand
// manifest (0 when there is none).
func (n *nodeEnv) published() (int, map[string]string) {
	pod, err := e2etest.ReadPod(n.layout.PublishedPodManifest())
	if err != nil {
		return 0, nil
	}
	rev, _ := strconv.Atoi(pod.Labels[revisions.RevisionLabel])
	return rev, pod.Annotations
}

func (n *nodeEnv) lkg() int {
	rev, err := n.layout.LastKnownGood(revisions.OS())
	if err != nil {
		return 0
	}
	return rev
}

func (n *nodeEnv) state(t *testing.T) *revisions.State {
	t.Helper()
	st, err := revisions.LoadState(revisions.OS(), n.layout.StateFile())
	if err != nil {
		t.Fatalf("load the state file: %v", err)
	}
	return st
}

// startsSince counts the start records of revision rev in the termination
// log written after since.
func (n *nodeEnv) startsSince(t *testing.T, rev int, since time.Time) int {
	t.Helper()
	recs, err := revisions.ReadTerminationRecords(n.layout.TerminationLog)
	if err != nil {
		t.Fatalf("read the termination log: %v", err)
	}
	count := 0
	for _, r := range recs {
		if r.Type == revisions.RecordStart && r.Revision == rev && r.Time.After(since) {
			count++
		}
	}
	return count
}

func (n *nodeEnv) monitorPublished() bool {
	_, err := os.Stat(n.layout.PublishedMonitorManifest())
	return err == nil
}

var httpClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// serving reports whether revision rev answers on the admin port and a
// request through the gateway (with Host host, when set) reaches the
// upstream called name.
func serving(rev int, host, name string) (bool, string) {
	resp, err := httpClient.Get(adminURL + "/healthz")
	if err != nil {
		return false, "admin: " + err.Error()
	}
	resp.Body.Close()
	if got := resp.Header.Get(revisions.HeaderRevision); got != strconv.Itoa(rev) {
		return false, fmt.Sprintf("admin answered for revision %q (%s)", got, resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, gatewayURL+"/", nil)
	if host != "" {
		req.Host = host
	}
	resp, err = httpClient.Do(req)
	if err != nil {
		return false, "gateway: " + err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != name {
		return false, fmt.Sprintf("gateway answered %s %q, want 200 %q", resp.Status, strings.TrimSpace(string(body)), name)
	}
	return true, "serving"
}

// mirrorPod returns the operand's mirror pod.
func (n *nodeEnv) mirrorPod() (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.client.CoreV1().Pods("kube-system").Get(ctx, n.mirrorPodName(), metav1.GetOptions{})
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var detail string
	for {
		var ok bool
		ok, detail = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			node.dump(t)
			t.Fatalf("after %s still waiting for %s: %s", timeout, what, detail)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitGood waits until revision rev is last-known-good, published without
// fallback annotations, its monitor gone, its mirror pod Ready and the
// gateway serving it; it returns when it began serving, as first seen.
func (n *nodeEnv) waitGood(t *testing.T, rev int, host, name string) time.Time {
	t.Helper()
	var servingSince time.Time
	waitFor(t, waitLong, fmt.Sprintf("revision %d to be good and serving", rev), func() (bool, string) {
		ok, detail := serving(rev, host, name)
		if !ok {
			return false, detail
		}
		if servingSince.IsZero() {
			servingSince = time.Now()
		}
		if pub, ann := n.published(); pub != rev || ann[revisions.AnnotationFallbackForRevision] != "" {
			return false, fmt.Sprintf("published revision %d, annotations %v", pub, ann)
		}
		if l := n.lkg(); l != rev {
			return false, fmt.Sprintf("last-known-good is %d", l)
		}
		if n.monitorPublished() {
			return false, "the monitor manifest is still published"
		}
		pod, err := n.mirrorPod()
		if err != nil {
			return false, "mirror pod: " + err.Error()
		}
		if pod.Labels[revisions.RevisionLabel] != strconv.Itoa(rev) || !podReady(pod) {
			return false, fmt.Sprintf("mirror pod of revision %q, ready %v", pod.Labels[revisions.RevisionLabel], podReady(pod))
		}
		return true, ""
	})
	return servingSince
}

// fallback is what a fallback left behind, as the tests saw it.
type fallback struct {
	reason, message string
	annotations     map[string]string
	// decided is when the fallback manifest was first seen published and
	// serving when the fallback revision was first seen serving again.
	decided, serving time.Time
}

// waitFallback waits until the fallback from revision failed to revision to
// is published and serving (the upstream called name answers), then checks
// the mirror pod's annotations, `revgate status` and the Event.
func (n *nodeEnv) waitFallback(t *testing.T, failed, to int, name string, published time.Time) fallback {
	t.Helper()
	var fb fallback
	waitFor(t, waitLong, fmt.Sprintf("the fallback from revision %d to %d", failed, to), func() (bool, string) {
		pub, ann := n.published()
		if pub != to || ann[revisions.AnnotationFallbackForRevision] != strconv.Itoa(failed) {
			return false, fmt.Sprintf("published revision %d, annotations %v", pub, ann)
		}
		fb.annotations = ann
		return true, ""
	})
	fb.decided = time.Now()
	fb.reason = fb.annotations[revisions.AnnotationFallbackReason]
	fb.message = fb.annotations[revisions.AnnotationFallbackMessage]
	if fb.message == "" {
		t.Errorf("fallback manifest lacks %s", revisions.AnnotationFallbackMessage)
	}
	waitFor(t, waitLong, fmt.Sprintf("revision %d to serve again", to), func() (bool, string) {
		return serving(to, "", name)
	})
	fb.serving = time.Now()
	t.Logf("revision %d: fallback (%s) published %.1fs and revision %d serving again %.1fs after publishing it",
		failed, fb.reason, fb.decided.Sub(published).Seconds(), to, fb.serving.Sub(published).Seconds())
	n.checkMirrorPod(t, failed, to, fb.reason)
	n.checkStatus(t, failed, to, fb.reason)
	n.checkEvent(t, failed, fb.reason, published)
	return fb
}

// checkMirrorPod waits for the mirror pod to carry the fallback annotations.
func (n *nodeEnv) checkMirrorPod(t *testing.T, failed, to int, reason string) {
	t.Helper()
	waitFor(t, time.Minute, "the mirror pod to show the fallback", func() (bool, string) {
		pod, err := n.mirrorPod()
		if err != nil {
			return false, err.Error()
		}
		a := pod.Annotations
		if pod.Labels[revisions.RevisionLabel] != strconv.Itoa(to) ||
			a[revisions.AnnotationFallbackForRevision] != strconv.Itoa(failed) ||
			a[revisions.AnnotationFallbackReason] != reason ||
			a[revisions.AnnotationFallbackMessage] == "" || !podReady(pod) {
			return false, fmt.Sprintf("mirror pod of revision %q, ready %v, annotations %v", pod.Labels[revisions.RevisionLabel], podReady(pod), a)
		}
		return true, ""
	})
}

// statusDoc is the part of `revgate status -o json` the tests read.
type statusDoc struct {
	Published struct {
		Revision int `json:"revision"`
		Fallback *struct {
			ForRevision int    `json:"forRevision"`
			Reason      string `json:"reason"`
		} `json:"fallback"`
	} `json:"published"`
	Nodes []struct {
		Node     string `json:"node"`
		Pod      string `json:"pod"`
		Revision int    `json:"revision"`
		Ready    bool   `json:"ready"`
		Fallback *struct {
			ForRevision int    `json:"forRevision"`
			Reason      string `json:"reason"`
			Message     string `json:"message"`
		} `json:"fallback"`
	} `json:"nodes"`
}

func (n *nodeEnv) statusArgs(extra ...string) []string {
	return append([]string{"status", "--resource-dir=" + n.layout.ResourceDir, "--manifests-dir=" + n.layout.ManifestsDir,
		"--kubeconfig=" + n.kubeconfig}, extra...)
}

// checkStatus checks that `revgate status --kubeconfig` shows the fallback on
// the node's mirror pod, in JSON and in text.
func (n *nodeEnv) checkStatus(t *testing.T, failed, to int, reason string) {
	t.Helper()
	out, err := n.revgate(t, n.statusArgs("-o", "json")...)
	if err != nil {
		t.Errorf("revgate status -o json: %v\n%s", err, out)
		return
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Errorf("revgate status -o json: %v\n%s", err, out)
		return
	}
	found := false
	for _, nd := range doc.Nodes {
		if nd.Node != n.name {
			continue
		}
		found = true
		if nd.Revision != to || nd.Fallback == nil || nd.Fallback.ForRevision != failed || nd.Fallback.Reason != reason || nd.Fallback.Message == "" {
			t.Errorf("revgate status shows node %s with revision %d and fallback %+v, want revision %d falling back from %d with %s\n%s",
				n.name, nd.Revision, nd.Fallback, to, failed, reason, out)
		}
	}
	if !found {
		t.Errorf("revgate status shows no mirror pod on node %s:\n%s", n.name, out)
	}
	text, err := n.revgate(t, n.statusArgs()...)
	if err != nil {
		t.Errorf("revgate status: %v\n%s", err, text)
		return
	}
	for _, want := range []string{n.name, reason, fmt.Sprintf("revision %d", failed)} {
		if !strings.Contains(text, want) {
			t.Errorf("revgate status lacks %q:\n%s", want, text)
		}
	}
}

// checkEvent waits for the monitor's Event about the fallback.
func (n *nodeEnv) checkEvent(t *testing.T, failed int, reason string, since time.Time) {
	t.Helper()
	waitFor(t, 30*time.Second, "the fallback Event", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		evs, err := n.client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + monitor.EventFallbackToLastKnownGood})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name != n.mirrorPodName() || ev.CreationTimestamp.Time.Before(since.Add(-time.Second)) {
				continue
			}
			seen = append(seen, ev.Message)
			if strings.Contains(ev.Message, reason) && strings.Contains(ev.Message, strconv.Itoa(failed)) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events on %s since publishing: %q", n.mirrorPodName(), seen)
	})
}

// checkFailed checks the state file's record of a failed revision.
func (n *nodeEnv) checkFailed(t *testing.T, rev int, reason string) *revisions.RevisionState {
	t.Helper()
	r := n.state(t).Revisions[rev]
	if r == nil {
		t.Fatalf("the state file has no revision %d", rev)
	}
	if r.Outcome != revisions.OutcomeFailed || r.Reason != reason {
		t.Errorf("revision %d: outcome %s reason %q, want %s %q", rev, r.Outcome, r.Reason, revisions.OutcomeFailed, reason)
	}
	if retried := r.NextRetry != nil; retried != revisions.Retried(reason) {
		t.Errorf("revision %d (%s): retry pending %v, want %v", rev, reason, retried, revisions.Retried(reason))
	}
	if l := n.lkg(); l == rev {
		t.Errorf("failed revision %d is last-known-good", rev)
	}
	return r
}

// dump logs what the node shows, for a failing wait.
func (n *nodeEnv) dump(t *testing.T) {
	t.Helper()
	if n == nil {
		return
	}
	pub, ann := n.published()
	t.Logf("published revision %d annotations %v; last-known-good %d; monitor published %v", pub, ann, n.lkg(), n.monitorPublished())
	if data, err := os.ReadFile(n.layout.StateFile()); err == nil {
		t.Logf("state file:\n%s", data)
	}
	if out, err := n.revgate(t, n.statusArgs()...); err == nil {
		t.Logf("revgate status:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if pods, err := n.client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			var cs []string
			for _, c := range p.Status.ContainerStatuses {
				cs = append(cs, fmt.Sprintf("%s ready=%v restarts=%d state=%+v", c.Name, c.Ready, c.RestartCount, c.State))
			}
			t.Logf("pod %s revision %s phase %s: %s", p.Name, p.Labels[revisions.RevisionLabel], p.Status.Phase, strings.Join(cs, "; "))
		}
	}
	if data, err := os.ReadFile(n.layout.TerminationLog); err == nil {
		t.Logf("termination log (tail):\n%s", tail(string(data), 10))
	}
	logs, _ := filepath.Glob(filepath.Join(n.vars["NODE_ROOT"], "kubelet", "pod-logs", "*", "*", "*.log"))
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			t.Logf("%s (tail):\n%s", l, tail(string(data), 15))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// upstream is a host process's HTTP server on loopback answering every
// request with its name; it can be stopped and started on the same port.
type upstream struct {
	name, addr string
	mu         sync.Mutex
	srv        *http.Server
}

var (
	upstreamsMu sync.Mutex
	upstreams   []*upstream
)

// newUpstream reserves a port for an upstream, not started yet.
func newUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	u := &upstream{name: name, addr: addr}
	upstreamsMu.Lock()
	upstreams = append(upstreams, u)
	upstreamsMu.Unlock()
	return u
}

func (u *upstream) start(t *testing.T) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv != nil {
		return
	}
	var l net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if l, err = net.Listen("tcp", u.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("upstream %s: %v", u.name, err)
	}
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, u.name)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(u.srv)
}

func (u *upstream) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv != nil {
		u.srv.Close()
		u.srv = nil
	}
}

func stopUpstreams() {
	upstreamsMu.Lock()
	defer upstreamsMu.Unlock()
	for _, u := range upstreams {
		u.stop()
	}
}
