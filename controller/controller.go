package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/revgate/revgate/internal/doubling"
	"github.com/revgate/revgate/revisions"
)

// Component is the Events' source component.
const Component = "revgate-controller"

// Deps are what the controller talks to. Client and Dynamic are required;
// the others default as documented.
type Deps struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Recorder records Events; default: a broadcaster writing to the API.
	Recorder record.EventRecorder
	// Endpoints receives the live EndpointSlices; default: the file
	// Options.Render.EndpointsFile, which the rendered proxy follows.
	Endpoints EndpointsWriter
	// Rollout gates installs; default AllowAll.
	Rollout Rollout
	// FS is the file-system seam; default revisions.OS().
	FS revisions.FS
	// Clock is the time of the debouncing, the disk poll and resync, the
	// retries of failed syncs and of list and watch calls, and the
	// installs' timestamps; default clock.RealClock. client-go's own
	// timers (reflectors, the Event broadcaster) keep the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Controller is the cluster loop of one node.
type Controller struct {
	opts      Options
	client    kubernetes.Interface
	dyn       dynamic.Interface
	recorder  record.EventRecorder
	endpoints EndpointsWriter
	rollout   Rollout
	fs        revisions.FS
	clock     clock.WithTickerAndDelayedExecution
	log       *slog.Logger
	// baseLog is the logger handed in, for the installer, which names
	// itself.
	baseLog *slog.Logger

	cache *informerCache
	// cacheView is what selection reads: the informers, or a test's cache.
	cacheView Cache

	structure, liveEndpoints, status *debouncer
	broadcaster                      record.EventBroadcaster

	// mu guards what the loops share.
	mu        sync.Mutex
	selection *Selection

	// Owned by the structure loop.
	renderer renderer
	digests  map[int]string
	held     map[[2]int]bool
	verdicts map[verdictKey]bool

	// published remembers the Services of the published revisions, whose
	// live endpoints are written too.
	published publishedServices

	// endpointsMu serialises endpoint writes; lastEndpoints is the JSON of
	// the last list written.
	endpointsMu   sync.Mutex
	lastEndpoints []byte

	// Owned by the status loop.
	served       *servedRevision
	reported     map[eventKey]string
	nodeAddr     string
	noAddrLogged bool

	// onSync, when set, is called after every sync of a loop with its
	// outcome; tests wait on it.
	onSync func(loop string, err error)
}

type verdictKey struct {
	revision, attempt int
	outcome           revisions.Outcome
}

// New sets a controller up; nothing runs before Run. opts must have been
// validated.
func New(opts Options, deps Deps) (*Controller, error) {
	if deps.Client == nil || deps.Dynamic == nil {
		return nil, errors.New("controller: Kubernetes clients are required")
	}
	c := &Controller{
		opts:      opts,
		client:    deps.Client,
		dyn:       deps.Dynamic,
		recorder:  deps.Recorder,
		endpoints: deps.Endpoints,
		rollout:   deps.Rollout,
		fs:        deps.FS,
		clock:     deps.Clock,
		log:       deps.Logger,
		digests:   map[int]string{},
		held:      map[[2]int]bool{},
		verdicts:  map[verdictKey]bool{},
		reported:  map[eventKey]string{},
	}
	if c.rollout == nil {
		c.rollout = AllowAll{}
	}
	if c.endpoints == nil && opts.Render.EndpointsFile != "" {
		c.endpoints = EndpointsFile(opts.Render.EndpointsFile)
	}
	if c.fs.ReadFile == nil {
		c.fs = revisions.OS()
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.baseLog = c.log
	c.log = c.log.With("component", "controller", "target", opts.Layout.Target)
	if c.recorder == nil {
		c.broadcaster = record.NewBroadcaster()
		c.recorder = c.broadcaster.NewRecorder(eventScheme, corev1.EventSource{Component: Component, Host: opts.NodeName})
	}
	c.structure = newDebouncer(c.clock, opts.QuietPeriod, opts.MaxDelay)
	c.liveEndpoints = newDebouncer(c.clock, endpointsQuiet, endpointsMaxDelay)
	c.status = newDebouncer(c.clock, statusQuiet, statusMaxDelay)
	ic, err := newInformerCache(c.client, c.dyn, opts.Namespaces, opts.Resync, c.clock, c.log, c.changed)
	if err != nil {
		return nil, err
	}
	c.cache, c.cacheView = ic, ic
	return c, nil
}

// changed routes an informer event to the loops it concerns.
func (c *Controller) changed(k changeKind) {
	switch k {
	case changeStructure:
		c.structure.Trigger()
	case changeEndpoints:
		c.liveEndpoints.Trigger()
	case changeStatus:
		c.status.Trigger()
	}
}

// Run runs the controller until ctx is done. With the API server away it
// waits, retrying with backoff; the gateway serves on meanwhile.
func (c *Controller) Run(ctx context.Context) error {
	if c.broadcaster != nil {
		c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
		defer c.broadcaster.Shutdown()
	}
	c.log.Info("starting", "node", c.opts.NodeName, "ingress_class", c.opts.IngressClass, "namespaces", c.opts.Namespaces, "resource_dir", c.opts.Layout.ResourceDir, "endpoints_file", c.opts.Render.EndpointsFile)
	if c.endpoints == nil {
		c.log.Warn("no live endpoints: each revision serves the endpoints it was cut with")
	}
	if err := c.cache.start(ctx); err != nil {
		return fmt.Errorf("start informers: %w", err)
	}
	c.log.Info("caches synced")
	var wg sync.WaitGroup
	for _, l := range []struct {
		name string
		d    *debouncer
		sync func(context.Context) error
	}{
		{"structure", c.structure, c.syncStructure},
		{"endpoints", c.liveEndpoints, c.syncEndpoints},
		{"status", c.status, c.syncStatus},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.loop(ctx, l.name, l.d, l.sync)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.watchDisk(ctx)
	}()
	c.structure.Trigger()
	c.status.Trigger()
	wg.Wait()
	return nil
}

// Retries of a failed sync.
const (
	syncRetryInitial = 500 * time.Millisecond
	syncRetryMax     = 30 * time.Second
)

// loop runs sync each time d says a burst is due; a failed sync is retried
// after syncRetryInitial doubling to syncRetryMax until it succeeds, a
// later burst being folded into the retry.
func (c *Controller) loop(ctx context.Context, name string, d *debouncer, sync func(context.Context) error) {
	log := c.log.With("loop", name)
	b := doubling.New(syncRetryInitial, syncRetryMax, c.clock)
	for {
		if err := d.Wait(ctx); err != nil {
			return
		}
		b.Reset()
		for {
			err := c.safely(ctx, sync)
			if c.onSync != nil {
				c.onSync(name, err)
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			wait := b.NextBackOff()
			log.Warn("sync failed, retrying", "err", err, "wait", wait)
			t := c.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
}

// safely runs sync, turning a panic into an error with the stack logged,
// so that one bad object does not stop the loop.
func (c *Controller) safely(ctx context.Context, sync func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("sync panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return sync(ctx)
}

// watchDisk triggers the structure and status loops when the monitor's
// verdict on disk changes (published manifest, state file, last-known-good
// link, installed revisions), when IngressRoutes become available, and on
// every resync period.
func (c *Controller) watchDisk(ctx context.Context) {
	tick := c.clock.NewTicker(diskPoll)
	defer tick.Stop()
	last := c.diskFingerprint()
	lastResync, lastCRD := c.clock.Now(), c.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		now := c.clock.Now()
		if fp := c.diskFingerprint(); fp != last {
			last = fp
			c.structure.Trigger()
			c.status.Trigger()
		}
		if now.Sub(lastResync) >= c.opts.Resync {
			lastResync = now
			c.structure.Trigger()
			c.status.Trigger()
		}
		if now.Sub(lastCRD) >= ingressRoutePoll {
			lastCRD = now
			if _, err := c.cache.startIngressRoutes(ctx); err != nil {
				c.log.Warn("checking for IngressRoutes failed", "err", err)
			}
		}
	}
}

// diskFingerprint sums up what the monitor and other installers change on
// disk.
func (c *Controller) diskFingerprint() string {
	l := c.opts.Layout
	pub, _ := c.fs.ReadFile(l.PublishedPodManifest())
	state, _ := c.fs.ReadFile(l.StateFile())
	lkg, _ := c.fs.Readlink(l.LastKnownGoodLink())
	listing, _ := l.List(c.fs)
	return fmt.Sprintf("%x|%x|%s|%v", pub, state, lkg, listing.Revisions)
}

// setSelection records the latest selection for the endpoints and status loops.
func (c *Controller) setSelection(sel *Selection) {
	c.mu.Lock()
	c.selection = sel
	c.mu.Unlock()
}

func (c *Controller) currentSelection() *Selection {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.selection
}

// syncStructure renders the snapshot, hands its endpoints to the gateway
// and installs it when it differs from the installed revision.
func (c *Controller) syncStructure(ctx context.Context) error {
	start := c.clock.Now()
	sel := selectObjects(c.opts.Config, c.cacheView)
	snap, err := c.renderer.render(&sel.Objects)
	if err != nil {
		return err
	}
	snap.RenderTime = c.clock.Since(start)
	c.setSelection(sel)
	// The endpoints go first, so that a new revision's proxy starts with
	// them; a failure to write them does not hold the revision back (it
	// carries its endpoints).
	errEndpoints := c.writeEndpoints(c.liveSlices(sel, snap.Slices))
	if err := c.reconcileRevision(ctx, snap); err != nil {
		return errors.Join(err, errEndpoints)
	}
	c.status.Trigger()
	return errEndpoints
}

// syncEndpoints hands the current EndpointSlices of the served Services
// to the gateway.
func (c *Controller) syncEndpoints(context.Context) error {
	sel := c.currentSelection()
	if sel == nil {
		return nil // the first structure sync writes them
	}
	return c.writeEndpoints(c.liveSlices(sel, nil))
}

// writeEndpoints writes the slices when they differ from the last list written.
func (c *Controller) writeEndpoints(slices []discoveryv1.EndpointSlice) error {
	if c.endpoints == nil {
		return nil
	}
	if slices == nil {
		slices = []discoveryv1.EndpointSlice{}
	}
	data, err := json.Marshal(slices)
	if err != nil {
		return fmt.Errorf("encode endpoints: %w", err)
	}
	c.endpointsMu.Lock()
	defer c.endpointsMu.Unlock()
	if c.lastEndpoints != nil && string(c.lastEndpoints) == string(data) {
		return nil
	}
	if err := c.endpoints.WriteEndpoints(slices); err != nil {
		return fmt.Errorf("write live endpoints: %w", err)
	}
	c.lastEndpoints = data
	c.log.Debug("live endpoints written", "slices", len(slices))
	return nil
}
