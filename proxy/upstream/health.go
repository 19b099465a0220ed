package upstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"

	"k8s.io/utils/clock"

	"github.com/revgate/revgate/proxy/model"
)

// probeResult is the outcome of one health-check request.
type probeResult int

const (
	probeOK        probeResult = iota // 200
	probeFailed                       // other status, error, timeout
	probeUnhealthy                    // 503: unhealthy at once
)

// tracker turns probe results into verdicts with thresholds.
type tracker struct {
	hc         model.HealthCheck
	successes  int
	failures   int
	everPassed bool
}

// observe returns the new verdict given the current one and a result.
func (t *tracker) observe(healthy bool, r probeResult) bool {
	switch r {
	case probeOK:
		t.failures = 0
		t.successes++
		if !t.everPassed {
			t.everPassed = true
			return true
		}
		if !healthy && t.successes >= t.hc.HealthyThreshold {
			return true
		}
		return healthy
	case probeUnhealthy:
		t.successes = 0
		t.failures++
		return false
	default:
		t.successes = 0
		t.failures++
		if healthy && t.failures >= t.hc.UnhealthyThreshold {
			return false
		}
		return healthy
	}
}

// checker is the health checking of one pool while RunHealthChecks runs.
type checker struct {
	ctx    context.Context
	clk    clock.WithTicker
	log    *slog.Logger
	client *http.Client
	hc     model.HealthCheck
	wg     sync.WaitGroup
}

// RunHealthChecks checks the endpoints of the pool on its backend's health
// check until ctx is done; it returns at once when the backend has none.
// Each endpoint is checked right away and then on every tick of clk;
// endpoints added by SetEndpoints are checked from when they are added,
// removed ones no more once they leave.
func (p *Pool) RunHealthChecks(ctx context.Context, clk clock.WithTicker, log *slog.Logger) {
	if p.Backend.HealthCheck == nil {
		return
	}
	hc := p.Backend.HealthCheck.WithDefaults()
	c := &checker{
		ctx: ctx,
		clk: clk,
		log: log,
		client: &http.Client{
			Transport: p.Transport,
			Timeout:   hc.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		hc: hc,
	}
	p.mu.Lock()
	if p.checker != nil {
		p.mu.Unlock()
		return
	}
	p.checker = c
	for _, e := range *p.endpoints.Load() {
		p.startCheckLocked(e)
	}
	for _, e := range p.lingering {
		p.startCheckLocked(e)
	}
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.checker = nil
	p.mu.Unlock()
	c.wg.Wait()
}

// startCheckLocked starts the check loop of e.
func (p *Pool) startCheckLocked(e *Endpoint) {
	c := p.checker
	ctx, cancel := context.WithCancel(c.ctx)
	e.stopCheck = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		p.checkLoop(ctx, c, e)
	}()
}

func (p *Pool) checkLoop(ctx context.Context, c *checker, e *Endpoint) {
	log := c.log.With("backend", p.Backend.Key, "endpoint", e.Addr)
	t := &tracker{hc: c.hc}
	ticker := c.clk.NewTicker(c.hc.Interval)
	defer ticker.Stop()
	for {
		p.checkOnce(ctx, log, c.client, c.hc, t, e)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (p *Pool) checkOnce(ctx context.Context, log *slog.Logger, client *http.Client, hc model.HealthCheck, t *tracker, e *Endpoint) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("health check panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	res, detail := p.probe(ctx, client, hc, e)
	if ctx.Err() != nil {
		return
	}
	was := e.Healthy()
	now := t.observe(was, res)
	if now != was {
		log.Info("endpoint health changed", "healthy", now, "detail", detail)
	}
	p.SetHealthy(e, now)
	p.checks.Add(1)
}

func (p *Pool) probe(ctx context.Context, client *http.Client, hc model.HealthCheck, e *Endpoint) (probeResult, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Scheme+"://"+e.Addr+hc.Path, nil)
	if err != nil {
		return probeFailed, err.Error()
	}
	req.Host = hc.Host
	req.Header.Set("User-Agent", "revgate-healthcheck")
	resp, err := client.Do(req)
	if err != nil {
		return probeFailed, err.Error()
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return probeOK, "200"
	case http.StatusServiceUnavailable:
		return probeUnhealthy, "503"
	default:
		return probeFailed, fmt.Sprintf("status %d", resp.StatusCode)
	}
}
