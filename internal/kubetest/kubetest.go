// Package kubetest runs a real etcd and kube-apiserver on loopback for tests
// that use client-go. The API server is built from the Go module proxy by
// hack/kube/build.sh (cached between runs) and etcd comes from Debian; both are
// started once per test binary, on first use, under a scratch folder.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }
//
// and call Config or Kubeconfig in the tests that need the API server.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/revgate/revgate/internal/testcert"
)

// Server is a running etcd and kube-apiserver.
type Server struct {
	dir        string
	procs      []*exec.Cmd
	config     *rest.Config
	kubeconfig string

	// apiMu guards the kube-apiserver process, which StopAPIServer and
	// StartAPIServer replace; apiArgs start it again on the same port.
	apiMu   sync.Mutex
	apiBin  string
	apiArgs []string
	api     *exec.Cmd
	token   string
	ca      []byte
}

var (
	once    sync.Once
	server  *Server
	initErr error
)

// Run runs the tests and stops the servers afterwards; use it in TestMain.
func Run(m *testing.M) int {
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	return code
}

// Config returns a client configuration with cluster-admin rights on the
// shared API server, starting it on first use. Without the binaries (the build
// failed) the test fails in CI and is skipped with the reason elsewhere.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	s := get(t)
	return rest.CopyConfig(s.config)
}

// Kubeconfig returns the path of a kubeconfig file for the shared API server.
func Kubeconfig(t testing.TB) string {
	t.Helper()
	return get(t).kubeconfig
}

// Start starts an etcd and kube-apiserver of its own for a program that is
// not a test (a benchmark driver); Stop ends them.
func Start() (*Server, error) { return start() }

// Config returns a client configuration with cluster-admin rights.
func (s *Server) Config() *rest.Config { return rest.CopyConfig(s.config) }

// KubeconfigFile returns the path of the server's admin kubeconfig file.
func (s *Server) KubeconfigFile() string { return s.kubeconfig }

func get(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { server, initErr = start() })
	if initErr != nil {
		if os.Getenv("CI") != "" || os.Getenv("REVGATE_REQUIRE_KUBE") != "" {
			t.Fatalf("kube-apiserver: %v", initErr)
		}
		t.Skipf("kube-apiserver not available (hack/kube/build.sh): %v", initErr)
	}
	return server
}

func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate source")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// binDir builds (or finds cached) kube-apiserver and returns its folder.
func binDir() (string, error) {
	if d := os.Getenv("REVGATE_KUBE_BIN"); d != "" {
		return d, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", "kube", "build.sh"))
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/kube/build.sh: %w: %s", err, lastLines(stderr.String(), 10))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd not installed: %w", err)
	}
	dir, err := os.MkdirTemp("", "revgate-kubetest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()

	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := s.spawn("etcd", etcdBin,
		"--name=kubetest",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--unsafe-no-fsync=true",
	); err != nil {
		return nil, err
	}

	certPEM, keyPEM, err := testcert.PEM("localhost", "127.0.0.1")
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      saPEM,
		"tokens.csv":  []byte(token + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	s.apiBin = filepath.Join(bin, "kube-apiserver")
	s.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
	}
	if err := s.spawn("kube-apiserver", s.apiBin, s.apiArgs...); err != nil {
		return nil, err
	}
	s.api = s.procs[len(s.procs)-1]
	s.token, s.ca = token, certPEM
	host := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	s.config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certPEM},
		QPS:             100,
		Burst:           200,
	}
	if err := waitReady(host, token, certPEM, 90*time.Second); err != nil {
		return nil, fmt.Errorf("%w; logs in %s", err, dir)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: certPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "kubetest"
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, s.kubeconfig); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// StopAPIServer kills the shared kube-apiserver (etcd keeps running), as
// an outage: clients get connection errors until StartAPIServer. The test
// must not run in parallel with others of its package that use the server.
func StopAPIServer(t testing.TB) {
	t.Helper()
	s := get(t)
	s.apiMu.Lock()
	defer s.apiMu.Unlock()
	if s.api == nil {
		return
	}
	// A kill, not a graceful shutdown: the server goes away at once, as in a
	// crash, and its watches break without a goodbye.
	_ = syscall.Kill(-s.api.Process.Pid, syscall.SIGKILL)
	_ = s.api.Wait()
	s.api = nil
}

// StartAPIServer starts the shared kube-apiserver again on the same address
// and waits until it is ready; it does nothing when it runs.
func StartAPIServer(t testing.TB) {
	t.Helper()
	s := get(t)
	s.apiMu.Lock()
	defer s.apiMu.Unlock()
	if s.api != nil {
		return
	}
	if err := s.spawn("kube-apiserver", s.apiBin, s.apiArgs...); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	s.api = s.procs[len(s.procs)-1]
	if err := waitReady(s.config.Host, s.token, s.ca, 90*time.Second); err != nil {
		t.Fatalf("restart kube-apiserver: %v; logs in %s", err, s.dir)
	}
}

func (s *Server) spawn(name, bin string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The servers die with the test binary even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf.Close()
	s.procs = append(s.procs, cmd)
	return nil
}

func waitReady(host, token string, ca []byte, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s: %s", timeout, last)
}

// stopProcess ends a server's process group: SIGTERM, then SIGKILL after 10s.
func stopProcess(p *exec.Cmd) {
	if p.ProcessState != nil {
		return // already waited for
	}
	_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Stop ends the servers and removes the scratch folder.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		stopProcess(s.procs[i])
	}
	if os.Getenv("REVGATE_KUBETEST_KEEP") == "" {
		_ = os.RemoveAll(s.dir)
	}
}
