package e2enode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Constant load through the gateway while a scenario runs: the figures that
// say whether a rollout, good or bad, interrupted the service.
const (
	// loadFreshWorkers open a new connection for every request, so that a
	// moment with nothing listening on the gateway's port shows as a
	// refused connection.
	loadFreshWorkers = 2
	// loadKeepAliveWorkers reuse their connections, as most clients do, so
	// that a connection closed under a request shows too.
	loadKeepAliveWorkers = 1
	// loadPause is each worker's pause between requests.
	loadPause = 20 * time.Millisecond
	// loadTimeout bounds one request.
	loadTimeout = 2 * time.Second
	// loadSamples is how many failures are kept to show what went wrong.
	loadSamples = 5
)

// load sends requests through the gateway (Host gatewayHost, which every
// configuration of the suite serves) and counts what fails: a transport
// error or any status but 200.
type load struct {
	scenario string
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	started  time.Time

	mu       sync.Mutex
	requests int
	failed   int
	lastOK   time.Time
	gap      time.Duration
	samples  []string
}

// loadResult is what one scenario's load saw.
type loadResult struct {
	Scenario string
	Requests int
	Failed   int
	// Gap is the longest time without a successful answer: between two
	// successes, or from the start or to the end of the scenario.
	Gap      time.Duration
	Duration time.Duration
	Samples  []string
}

var (
	loadResultsMu sync.Mutex
	loadResults   []loadResult
)

// startLoad starts the load of one scenario; stop it with stop.
func startLoad(t *testing.T, scenario string) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{scenario: scenario, cancel: cancel, started: time.Now()}
	l.lastOK = l.started
	for i := range loadFreshWorkers + loadKeepAliveWorkers {
		tr := &http.Transport{DisableKeepAlives: i < loadFreshWorkers, MaxIdleConnsPerHost: 1}
		client := &http.Client{Transport: tr, Timeout: loadTimeout}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer tr.CloseIdleConnections()
			l.worker(ctx, client)
		}()
	}
	return l
}

func (l *load) worker(ctx context.Context, client *http.Client) {
	for ctx.Err() == nil {
		err := l.request(ctx, client)
		if ctx.Err() != nil {
			return // the request was cut by stop, not by the gateway
		}
		l.record(time.Now(), err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(loadPause):
		}
	}
}

func (l *load) request(ctx context.Context, client *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gatewayURL+"/", nil)
	if err != nil {
		return err
	}
	req.Host = gatewayHost
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %q", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func (l *load) record(at time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if err != nil {
		l.failed++
		if len(l.samples) < loadSamples {
			l.samples = append(l.samples, fmt.Sprintf("%.1fs: %v", at.Sub(l.started).Seconds(), err))
		}
		return
	}
	l.gap = max(l.gap, at.Sub(l.lastOK))
	l.lastOK = at
}

// stop ends the load, logs and keeps its figures.
func (l *load) stop(t *testing.T) loadResult {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	end := time.Now()
	l.mu.Lock()
	r := loadResult{Scenario: l.scenario, Requests: l.requests, Failed: l.failed,
		Gap: max(l.gap, end.Sub(l.lastOK)), Duration: end.Sub(l.started), Samples: l.samples}
	l.mu.Unlock()
	t.Logf("load: %s: %d requests in %.1fs, %d failed, longest gap in service %.2fs", r.Scenario, r.Requests,
		r.Duration.Seconds(), r.Failed, r.Gap.Seconds())
	for _, s := range r.Samples {
		t.Logf("load: %s: failure at %s", r.Scenario, s)
	}
	loadResultsMu.Lock()
	loadResults = append(loadResults, r)
	loadResultsMu.Unlock()
	return r
}

// stopNoFailures stops the load and fails the test when a request failed:
// the serving revision must answer through any rollout, good or bad.
func (l *load) stopNoFailures(t *testing.T) {
	t.Helper()
	if r := l.stop(t); r.Failed > 0 {
		t.Errorf("%d of %d requests failed during %s; longest gap in service %.2fs; first failures: %v",
			r.Failed, r.Requests, r.Scenario, r.Gap.Seconds(), r.Samples)
	}
}

// logLoadTable logs every scenario's figures as one Markdown table.
func logLoadTable(t *testing.T) {
	t.Helper()
	loadResultsMu.Lock()
	defer loadResultsMu.Unlock()
	if len(loadResults) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("load figures:\n| scenario | requests | failed | longest gap (s) |\n|---|---|---|---|\n")
	for _, r := range loadResults {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f |\n", r.Scenario, r.Requests, r.Failed, r.Gap.Seconds())
	}
	t.Log(b.String())
}
