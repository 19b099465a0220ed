// Package controller is revgate's cluster loop: `revgate controller` watches
// Ingresses, IngressClasses, Services, EndpointSlices, TLS Secrets and
// Contour IngressRoutes with shared informers and turns `kubectl apply` into
// guarded revisions.
//
// It works with snapshots, not events. After a burst of changes has settled
// (a quiet period, bounded by a maximum delay) it selects what the gateway
// serves (the Ingresses of revgate's class, every IngressRoute, and the
// Services, EndpointSlices and TLS Secrets they name), renders it into a
// revision source (one file per object, sorted, without resourceVersion,
// managedFields, uid, status and other churn) and installs it through the
// installer library, under the installer's lock, only when its routing
// structure differs from the highest installed revision. The same cluster
// state always renders the same bytes, so a restarted controller cuts no
// revision.
//
// Endpoints are data: an EndpointSlice change never cuts a revision. The
// rendered revision carries the endpoints of the moment it was cut, so it
// serves on its own; the live ones go to the running gateway through an
// EndpointsWriter within a fraction of a second.
//
// The controller reads the gateway's verdict the way an operator does: the
// objects' statuses come from translating the published revision with the
// proxy's own configuration code (proxy/config), and the startup monitor's
// verdict from the state file and the published manifest. Broken, excluded
// and backfilled objects get Events with Kong's fallback wording; IngressRoutes
// get Contour's status (valid, invalid, orphaned); served Ingresses get the
// node's address in status.loadBalancer. When the monitor fell back from a
// revision, the same snapshot is not installed again before the monitor's
// retry time (never, for a failure that is not retried); a different one is
// installed at once.
//
// Rollout is the seam for node-by-node rollouts: it says whether this node
// may install a snapshot now and hears the monitor's verdict on it.
package controller
