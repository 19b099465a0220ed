package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/revgate/revgate/internal/e2etest"
	"github.com/revgate/revgate/revisions"
)

// monitorPIDs returns the processes running `revgate monitor` for this
// scenario's resource dir.
func (e *env) monitorPIDs() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(data, "\x00")), "\x00")
		if len(args) > 1 && args[1] == "monitor" && contains(args, "--resource-dir="+e.layout.ResourceDir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// killMonitor SIGKILLs the scenario's startup monitor, waiting for it to be
// running first.
func (e *env) killMonitor() {
	e.t.Helper()
	var pids []int
	waitFor(e.t, waitLong, "a running startup monitor", func() (bool, string) {
		pids = e.monitorPIDs()
		return len(pids) > 0, "no monitor process"
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			e.t.Logf("kill monitor %d: %v", pid, err)
		}
	}
	e.t.Logf("SIGKILLed monitor %v", pids)
}

// checkConsistent checks that the on-disk state agrees with itself after a
// crash: the last-known-good link and the state file name the same
// revision, which is Good, and both published manifests parse.
func (e *env) checkConsistent(lkg int) {
	e.t.Helper()
	if got := e.lkg(); got != lkg {
		e.t.Errorf("last-known-good %d, want %d", got, lkg)
	}
	st := e.state()
	if st.LastKnownGood != lkg {
		e.t.Errorf("state file's last-known-good %d, want %d", st.LastKnownGood, lkg)
	}
	if r := st.Revisions[lkg]; r == nil || r.Outcome != revisions.OutcomeGood {
		e.t.Errorf("last-known-good revision %d in the state file: %+v", lkg, r)
	}
	if _, err := e2etest.ReadPod(e.layout.PublishedPodManifest()); err != nil {
		e.t.Errorf("published operand manifest: %v", err)
	}
}

// TestKillSupervise: SIGKILL of the supervisor during a good or a bad
// rollout, at several moments; after a restart everything converges.
func TestKillSupervise(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bad   bool
		delay time.Duration
	}{
		{"good-at-0s", false, 0},
		{"good-at-1s", false, time.Second},
		{"good-at-3s", false, 3 * time.Second},
		{"bad-at-0s", true, 0},
		{"bad-at-2s", true, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.startGood()
			v2 := startUpstream(t, "v2")
			spec := installSpec{source: source(false, v2.addr).Write(t)}
			if tc.bad {
				spec.extra = []string{"--proxy-arg=--config-dir=/nonexistent"}
			}
			rev, _ := e.install(spec)
			time.Sleep(tc.delay)
			e.stopSupervise(syscall.SIGKILL)
			e.startSupervise()
			if tc.bad {
				e.waitFallback(rev, 1, revisions.ReasonCrashLooping, "v1")
				e.checkFailed(rev, revisions.ReasonCrashLooping)
				e.checkConsistent(1)
				return
			}
			e.waitGood(rev, "v2")
			e.checkConsistent(rev)
		})
	}
}

// TestKillMonitor: SIGKILL of the startup monitor while it watches a
// revision that never becomes ready, and again while its retry is pending;
// the restarted monitor falls back once, keeps the retry schedule and
// counts the attempts right.
func TestKillMonitor(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{time.Second, fallbackTimeout / 2} {
		t.Run(fmt.Sprintf("at-%s", delay), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			up := e.startGood()
			rev, published := e.install(installSpec{
				source: source(false, up.addr).Write(t),
				// A retry later than the suite's: the checks after each
				// fallback must read it before the retry publishes the
				// revision again, also on a loaded machine.
				extra: []string{"--proxy-arg=--fallback=off",
					"--monitor-arg=--retry-initial=" + (3 * retryInitial).String(), "--monitor-arg=--retry-max=" + (3 * retryMax).String()},
				mutate: e2etest.AppendConfig(e2etest.BrokenIngress),
			})
			time.Sleep(delay)
			e.killMonitor()
			e.waitFallback(rev, 1, revisions.ReasonNotReady, "v1")
			logRecovery(t, "not-ready-monitor-killed", published)
			r := e.checkFailed(rev, revisions.ReasonNotReady)
			if len(r.Fallbacks) != 1 {
				t.Errorf("%d fallbacks recorded for one failed rollout: %+v", len(r.Fallbacks), r.Fallbacks)
			}
			e.checkConsistent(1)
			first := r.Attempts

			// Killed while the retry is pending, the monitor must keep the
			// persisted schedule: the retry still happens and counts.
			e.killMonitor()
			waitFor(t, waitLong, "the retry to publish revision 2 again", func() (bool, string) {
				n, _ := e.published()
				return n == rev, fmt.Sprintf("published revision %d", n)
			})
			waitFor(t, waitLong, "the second fallback", func() (bool, string) {
				r := e.state().Revisions[rev]
				return r != nil && len(r.Fallbacks) >= 2, fmt.Sprintf("state %+v", r)
			})
			e.waitFallback(rev, 1, revisions.ReasonNotReady, "v1")
			r = e.checkFailed(rev, revisions.ReasonNotReady)
			if r.Attempts != first+1 || len(r.Fallbacks) != 2 {
				t.Errorf("after one retry: attempts %d (want %d), %d fallbacks (want 2)", r.Attempts, first+1, len(r.Fallbacks))
			}
			e.checkConsistent(1)
		})
	}
}
