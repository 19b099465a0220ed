package controller

import (
	"context"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/revgate/revgate/proxy/config"
	"github.com/revgate/revgate/revisions"
)

// EndpointsWriter hands the live EndpointSlices of the served Services to
// the running gateway, without a revision. It is called with the whole
// sorted list whenever it changes.
type EndpointsWriter interface {
	WriteEndpoints(slices []discoveryv1.EndpointSlice) error
}

// EndpointsWriterFunc adapts a function to EndpointsWriter.
type EndpointsWriterFunc func(slices []discoveryv1.EndpointSlice) error

// WriteEndpoints calls f.
func (f EndpointsWriterFunc) WriteEndpoints(slices []discoveryv1.EndpointSlice) error {
	return f(slices)
}

var _ EndpointsWriter = EndpointsWriterFunc(nil)

// EndpointsFile writes the live endpoints to the file a proxy follows with
// --endpoints-file, atomically, in the proxy's own format.
func EndpointsFile(path string) EndpointsWriter {
	return EndpointsWriterFunc(func(slices []discoveryv1.EndpointSlice) error {
		return config.WriteEndpointsFile(path, slices)
	})
}

// Verdict is the startup monitor's verdict on the revision that holds a
// snapshot on this node, as the state file records it.
type Verdict struct {
	Revision int
	// Outcome is Good or Failed.
	Outcome revisions.Outcome
	// Reason and Message of a failure.
	Reason, Message string
	// Attempt is the rollout of the revision the verdict is about (1 for the first).
	Attempt int
}

// Rollout is the seam for rolling a snapshot out node by node: it decides
// when this node may install a snapshot (identified by its digest) and
// hears this node's verdict on it.
type Rollout interface {
	// MayInstall reports whether this node may install the snapshot now;
	// when it may not, the controller asks again after retryAfter.
	MayInstall(ctx context.Context, digest string) (ok bool, retryAfter time.Duration, err error)
	// Report records this node's verdict on the snapshot; it is called once
	// per revision, outcome and attempt.
	Report(ctx context.Context, digest string, v Verdict) error
}

// AllowAll is the default Rollout of a single node: every snapshot may be
// installed at once and verdicts go nowhere.
type AllowAll struct{}

var _ Rollout = AllowAll{}

// MayInstall always allows.
func (AllowAll) MayInstall(context.Context, string) (bool, time.Duration, error) {
	return true, 0, nil
}

// Report does nothing.
func (AllowAll) Report(context.Context, string, Verdict) error { return nil }
