package monitor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/revgate/revgate/revisions"
)

// Answer is one answer of the operand's admin endpoint.
type Answer struct {
	// StatusCode of the HTTP response.
	StatusCode int
	// Body, cut at 64 KiB.
	Body string
	// Revision and PID from the X-Revgate-Revision and X-Revgate-Pid headers;
	// 0 when missing or malformed.
	Revision int
	PID      int
}

// Prober asks the operand's admin endpoint one question.
type Prober interface {
	Probe(ctx context.Context, url string) (Answer, error)
}

// ProberFunc adapts a function to Prober.
type ProberFunc func(ctx context.Context, url string) (Answer, error)

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, url string) (Answer, error) { return f(ctx, url) }

// HTTPProber probes with plain HTTP GETs. Keep-alives are off so that every
// probe opens a new connection: during a make-before-break replacement two
// processes listen on the admin port and the kernel picks one per connection.
type HTTPProber struct {
	Client *http.Client
}

var _ Prober = (*HTTPProber)(nil)

// NewHTTPProber returns a prober whose requests time out after timeout
// (default 2s when 0).
func NewHTTPProber(timeout time.Duration) *HTTPProber {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	return &HTTPProber{Client: &http.Client{Transport: tr, Timeout: timeout}}
}

// Probe GETs url.
func (p *HTTPProber) Probe(ctx context.Context, url string) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Answer{}, fmt.Errorf("build request for %s: %w", url, err)
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Answer{}, fmt.Errorf("read answer of %s: %w", url, err)
	}
	a := Answer{StatusCode: resp.StatusCode, Body: string(body)}
	a.Revision, _ = strconv.Atoi(resp.Header.Get(revisions.HeaderRevision))
	a.PID, _ = strconv.Atoi(resp.Header.Get(revisions.HeaderPID))
	return a, nil
}

// failedChecks returns the names and reasons of the "[-]name failed: reason"
// lines of a verbose readyz answer.
func failedChecks(body string) (names []string, lines []string) {
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "[-]")
		if !ok {
			continue
		}
		name := rest
		if i := strings.IndexAny(rest, " \t"); i >= 0 {
			name = rest[:i]
		}
		names = append(names, name)
		lines = append(lines, line)
	}
	return names, lines
}

// allDependencies reports whether every name is a dependency check.
func allDependencies(names []string) bool {
	if len(names) == 0 {
		return false
	}
	for _, n := range names {
		if !strings.HasPrefix(n, revisions.DependencyCheckPrefix) {
			return false
		}
	}
	return true
}
