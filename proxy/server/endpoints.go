package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/proxy/upstream"
)

// DefaultEndpointsRelistPeriod is how often the live endpoints file is read
// even without a watch event.
const DefaultEndpointsRelistPeriod = 5 * time.Second

// EndpointsOptions configure live endpoints: EndpointSlices read from a file
// that a controller replaces while the gateway runs, applied without a new
// revision (see config.LiveEndpoints for what they change).
type EndpointsOptions struct {
	// File is the live endpoints file (--endpoints-file); "" (the default)
	// turns live endpoints off and the revision's endpoints are served.
	File string
	// RelistPeriod is how often the file is read besides on watch events;
	// default 5s.
	RelistPeriod time.Duration
}

// Watcher restarts after a failure: from watchRetryInitial growing to
// watchRetryMax (the backoff's default factor 1.5, with its jitter); a watch
// that lasted watchResetAfter starts over.
const (
	watchRetryInitial = 500 * time.Millisecond
	watchRetryMax     = 30 * time.Second
	watchResetAfter   = time.Minute
)

// States of the live endpoints source (/debug/config/endpoints).
const (
	liveOff      = "off"
	liveMissing  = "missing"
	liveApplied  = "applied"
	liveRejected = "rejected"
)

// liveEndpoints follows the live endpoints file: it reads it at start, on
// every watch event of its folder and on a period, and applies every new
// valid content to the running pools. A file that cannot be read or
// decoded changes nothing.
type liveEndpoints struct {
	g    *Gateway
	opts EndpointsOptions
	log  *slog.Logger
	// readFile and newFSW are the file-system seam; tests swap them.
	readFile func(string) ([]byte, error)
	newFSW   func() (*fsnotify.Watcher, error)

	mu sync.Mutex // serialises syncs; guards the fields below
	// last is the content last read, applied or rejected.
	last      []byte
	state     string
	lastErr   string
	appliedAt time.Time
	// liveBackends are the backends whose endpoints come from the file.
	liveBackends int

	errors       *prometheus.CounterVec
	updates      prometheus.Counter
	lastUpdate   prometheus.Gauge
	liveBackendG prometheus.Gauge
	// healthMu orders endpoint health metric updates between the health
	// checks and endpoint set changes.
	healthMu sync.Mutex
}

// initLiveEndpoints sets live endpoints up when a file is configured and
// applies the file once, before anything is served.
func (g *Gateway) initLiveEndpoints() {
	o := g.opts.Endpoints
	if o.File == "" {
		return
	}
	if o.RelistPeriod <= 0 {
		o.RelistPeriod = DefaultEndpointsRelistPeriod
	}
	l := &liveEndpoints{
		g:        g,
		opts:     o,
		log:      g.opts.Logger.With("component", "endpoints", "file", o.File),
		readFile: os.ReadFile,
		newFSW:   fsnotify.NewWatcher,
		state:    liveMissing,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "revgate_endpoints_file_errors_total",
			Help: "Live endpoints file reads that failed (reason read) and file contents refused (reason decode); the endpoints served stay as they were.",
		}, []string{"reason"}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "revgate_endpoints_file_updates_total", Help: "Live endpoints file contents applied.",
		}),
		lastUpdate: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revgate_endpoints_file_last_update_timestamp_seconds", Help: "When the live endpoints file was last applied (Unix time).",
		}),
		liveBackendG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revgate_endpoints_live_backends", Help: "Backends whose endpoints come from the live endpoints file rather than the revision.",
		}),
	}
	for _, r := range []string{"read", "decode"} {
		l.errors.WithLabelValues(r)
	}
	g.metrics.Registry.MustRegister(l.errors, l.updates, l.lastUpdate, l.liveBackendG)
	g.live = l
	l.sync("start")
}

// runLiveEndpoints follows the file until ctx is done (nothing without one).
func (g *Gateway) runLiveEndpoints(ctx context.Context) {
	if g.live != nil {
		go g.live.run(ctx)
	}
}

func (l *liveEndpoints) run(ctx context.Context) {
	triggers := make(chan struct{}, 1)
	go l.watch(ctx, triggers)
	t := l.g.opts.Clock.NewTicker(l.opts.RelistPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-triggers:
			l.sync("watch")
		case <-t.C():
			l.sync("relist")
		}
	}
}

// sync reads the file and applies it when its content changed. A panic is
// logged with its stack and the next sync tries again.
func (l *liveEndpoints) sync(why string) {
	defer func() {
		if r := recover(); r != nil {
			l.log.Error("applying live endpoints panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := l.readFile(l.opts.File)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if l.state != liveMissing {
			l.log.Info("live endpoints file gone: serving the revision's endpoints")
		}
		l.apply(nil)
		l.state, l.last, l.lastErr = liveMissing, nil, ""
		return
	case err != nil:
		l.errors.WithLabelValues("read").Inc()
		if msg := err.Error(); msg != l.lastErr {
			l.log.Error("cannot read the live endpoints file; the endpoints served stay as they are", "err", err)
			l.lastErr = msg
		}
		return
	}
	if (l.state == liveApplied || l.state == liveRejected) && bytes.Equal(data, l.last) {
		return
	}
	l.last = data
	sl, err := config.DecodeEndpointsFile(l.opts.File, data)
	if err != nil {
		l.errors.WithLabelValues("decode").Inc()
		l.state, l.lastErr = liveRejected, err.Error()
		attrs := []any{"err", err}
		var ee *config.EndpointsError
		if errors.As(err, &ee) {
			attrs = append(attrs, "object", ee.Object.String(), "field", ee.Field)
		}
		l.log.Error("live endpoints file refused; the endpoints served stay as they are", attrs...)
		return
	}
	start := l.g.opts.Clock.Now()
	live := config.LiveEndpoints(l.g.Snapshot().Backends, sl)
	changed, added, removed := l.apply(live)
	l.state, l.lastErr, l.appliedAt = liveApplied, "", l.g.opts.Clock.Now()
	l.updates.Inc()
	l.lastUpdate.Set(float64(l.appliedAt.UnixNano()) / 1e9)
	l.log.Info("live endpoints applied", "trigger", why, "slices", len(sl), "live_backends", len(live),
		"changed_backends", changed, "added_endpoints", added, "removed_endpoints", removed, "took", l.g.opts.Clock.Since(start))
}

// apply sets every pool's endpoints: from live where it has an entry, else
// the revision's own. It returns how many pools changed and how many
// endpoints came and went.
func (l *liveEndpoints) apply(live map[string][]string) (changed, added, removed int) {
	rt := l.g.runtime.Load()
	for key, p := range rt.pools {
		addrs, ok := live[key]
		if !ok {
			addrs = p.Backend.Endpoints
		}
		a, r := p.SetEndpoints(addrs)
		if len(a)+len(r) == 0 {
			continue
		}
		changed++
		added += len(a)
		removed += len(r)
		l.endpointsChanged(key, a, r)
	}
	l.liveBackends = len(live)
	l.liveBackendG.Set(float64(len(live)))
	return changed, added, removed
}

// endpointsChanged keeps revgate_endpoint_healthy to the current sets.
func (l *liveEndpoints) endpointsChanged(key string, added, removed []*upstream.Endpoint) {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	for _, e := range removed {
		l.g.metrics.endpointHealthy.DeleteLabelValues(key, e.Addr)
	}
	for _, e := range added {
		l.g.metrics.setEndpointHealth(key, e.Addr, e.Healthy())
	}
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("backend endpoints changed", "backend", key, "added", addrList(added), "removed", addrList(removed))
	}
}

// endpointHealthChanged records a health verdict in the metrics, unless the
// endpoint left its pool meanwhile.
func (g *Gateway) endpointHealthChanged(p *upstream.Pool, e *upstream.Endpoint) {
	if l := g.live; l != nil {
		l.healthMu.Lock()
		defer l.healthMu.Unlock()
		if !slices.Contains(p.Endpoints(), e) {
			return
		}
	}
	g.metrics.setEndpointHealth(p.Backend.Key, e.Addr, e.Healthy())
}

func addrList(eps []*upstream.Endpoint) string {
	s := make([]string, 0, len(eps))
	for _, e := range eps {
		s = append(s, e.Addr)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// watch keeps an fsnotify watch on the file's folder and triggers a sync
// on every event naming the file; a failed watch is restarted with backoff
// while the periodic relist covers the gap.
func (l *liveEndpoints) watch(ctx context.Context, triggers chan<- struct{}) {
	clk := l.g.opts.Clock
	b := backoff.NewExponentialBackOff(backoff.WithClockProvider(clk))
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = watchRetryInitial, watchRetryMax, 0
	b.Reset()
	for {
		began := clk.Now()
		err := l.watchOnce(ctx, triggers)
		if ctx.Err() != nil {
			return
		}
		if clk.Since(began) > watchResetAfter {
			b.Reset()
		}
		if errors.Is(err, errRewatch) {
			continue
		}
		delay := b.NextBackOff()
		l.log.Warn("watching the live endpoints folder failed; reading it every relist period until the watch is back", "err", err, "retry_in", delay)
		t := clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// errRewatch asks for a new watch at once: the folder that was missing
// appeared.
var errRewatch = errors.New("folder appeared")

func trigger(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (l *liveEndpoints) watchOnce(ctx context.Context, triggers chan<- struct{}) (err error) {
	defer func() {
		if r := recover(); r != nil {
			l.log.Error("watching live endpoints panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	w, err := l.newFSW()
	if err != nil {
		return fmt.Errorf("create watcher: %w", err)
	}
	defer w.Close()
	dir := filepath.Clean(filepath.Dir(l.opts.File))
	name := filepath.Base(l.opts.File)
	watched, waitFor := dir, ""
	if err := w.Add(dir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
		// The writer creates the folder with its first file: watch the
		// parent until it does.
		watched, waitFor = filepath.Dir(dir), dir
		if err := w.Add(watched); err != nil {
			return fmt.Errorf("watch %s (for %s to appear): %w", watched, dir, err)
		}
		if _, err := os.Stat(dir); err == nil {
			return errRewatch
		}
	}
	// What changed while no watch was in place is found by this read.
	trigger(triggers)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("watcher closed its event channel")
			}
			p := filepath.Clean(ev.Name)
			switch {
			case waitFor != "":
				if p == waitFor {
					return errRewatch
				}
			case p == watched && ev.Has(fsnotify.Remove|fsnotify.Rename):
				trigger(triggers)
				return fmt.Errorf("folder %s was removed or renamed", watched)
			case filepath.Base(p) == name:
				// Dotfiles (the writers' temp files) never match the name;
				// their rename into place is an event of its own.
				trigger(triggers)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("watcher closed its error channel")
			}
			return fmt.Errorf("watcher: %w", err)
		}
	}
}

// endpointsDoc is served at /debug/config/endpoints.
type endpointsDoc struct {
	// File is the live endpoints file, "" when live endpoints are off.
	File string `json:"file"`
	// State is off, missing (the revision's endpoints are served), applied
	// or rejected (the last content read was refused; the one before is
	// served).
	State string `json:"state"`
	// Error is why the last read or content failed.
	Error string `json:"error,omitempty"`
	// AppliedAt is when a content was last applied.
	AppliedAt *time.Time `json:"appliedAt,omitempty"`
	// LiveBackends are the backends whose endpoints come from the file.
	LiveBackends int `json:"liveBackends"`
}

func (g *Gateway) debugEndpoints() any {
	l := g.live
	if l == nil {
		return endpointsDoc{State: liveOff}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := endpointsDoc{File: l.opts.File, State: l.state, Error: l.lastErr, LiveBackends: l.liveBackends}
	if !l.appliedAt.IsZero() {
		t := l.appliedAt.UTC()
		d.AppliedAt = &t
	}
	return d
}
