// Package model is the contract between the configuration side of the gateway
// (proxy/config: files → typed Kubernetes objects → translation → object-level
// fallback) and its data plane (router, upstreams, TLS, admin endpoints).
//
// A Snapshot is immutable once built: the data plane swaps whole snapshots and
// never mutates one, so it can be read by many goroutines without locks.
package model

import (
	"crypto/tls"
	"fmt"
	"time"
)

// ObjectRef names a configuration object.
type ObjectRef struct {
	// Group is the API group, "" for the core group.
	Group string `json:"group"`
	// Kind is the object kind, e.g. "Ingress".
	Kind string `json:"kind"`
	// Namespace is empty for cluster-scoped objects (IngressClass).
	Namespace string `json:"namespace,omitempty"`
	// Name is the object name.
	Name string `json:"name"`
}

// String renders the reference as kind/namespace/name (kind/name when the
// object is cluster-scoped).
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Severity of a Problem.
type Severity string

const (
	// SeverityError marks an object as broken.
	SeverityError Severity = "error"
	// SeverityWarning is reported but changes nothing that is served.
	SeverityWarning Severity = "warning"
)

// Problem is one finding about the configuration, naming where it is.
type Problem struct {
	// File is the file the object was read from ("" when not from a file).
	File string `json:"file,omitempty"`
	// Object is the object the problem is about (zero for file-level problems
	// such as unparsable YAML).
	Object ObjectRef `json:"object"`
	// Field is a JSON path into the object, e.g. "spec.rules[0].http.paths[1].path".
	Field string `json:"field,omitempty"`
	// Message says what is wrong, lower-case, no trailing period.
	Message string `json:"message"`
	// Severity is error or warning.
	Severity Severity `json:"severity"`
}

// String renders the problem as "file: kind/ns/name: field: message".
func (p Problem) String() string {
	s := ""
	if p.File != "" {
		s = p.File + ": "
	}
	if p.Object.Kind != "" {
		s += p.Object.String() + ": "
	}
	if p.Field != "" {
		s += p.Field + ": "
	}
	return s + p.Message
}

// PathType is how a route's path matches a request path.
type PathType string

const (
	// PathExact matches the request path exactly (case-sensitive).
	PathExact PathType = "Exact"
	// PathPrefix matches element-wise on '/'-separated segments; a trailing
	// slash in the route path is ignored. Ingress ImplementationSpecific paths
	// and IngressRoute match prefixes are translated to PathPrefix.
	PathPrefix PathType = "Prefix"
)

// Route is one entry of the routing table. Routes in a Snapshot are unique by
// (Host, Path, PathType); conflicts are resolved during translation.
type Route struct {
	// Host is an exact lower-case host name ("foo.com"), a wildcard with one
	// leading "*." label ("*.foo.com"), or "" for any host.
	Host string `json:"host"`
	// Path starts with '/'. For PathPrefix routes a trailing slash has been
	// removed (except for "/" itself).
	Path string `json:"path"`
	// PathType is Exact or Prefix.
	PathType PathType `json:"pathType"`
	// Default marks the catch-all from an Ingress spec.defaultBackend: used
	// only when no host and path route matches.
	Default bool `json:"default,omitempty"`
	// RedirectHTTPS answers plain-HTTP requests with a 301 to https (TLS
	// IngressRoute virtual hosts, except permitInsecure routes).
	RedirectHTTPS bool `json:"redirectHTTPS,omitempty"`
	// Cluster is where matching requests go.
	Cluster *Cluster `json:"cluster"`
	// Source is the object the route comes from.
	Source ObjectRef `json:"source"`
	// Backfilled is true when the route comes from the last-known-good version
	// of its object (object-level fallback).
	Backfilled bool `json:"backfilled,omitempty"`
}

// Strategy is a load-balancing strategy.
type Strategy string

const (
	// RoundRobin picks healthy endpoints in turn (the default).
	RoundRobin Strategy = "RoundRobin"
	// WeightedLeastRequest picks the one of two random healthy endpoints that
	// has fewer active requests.
	WeightedLeastRequest Strategy = "WeightedLeastRequest"
	// Random picks a random healthy endpoint.
	Random Strategy = "Random"
)

// Cluster is a weighted set of backends plus an optional canary.
type Cluster struct {
	// Name identifies the cluster in metrics and /debug/config/routes.
	Name string `json:"name"`
	// Backends receive traffic in proportion to their weights. Translation has
	// already applied the weight rules: missing weights share evenly, a zero
	// weight gets no traffic. The sum of weights is > 0 unless Backends is empty.
	Backends []WeightedBackend `json:"backends"`
	// Canary, when set, diverts a share of requests to another backend.
	Canary *Canary `json:"canary,omitempty"`
}

// WeightedBackend is a backend with its share of traffic.
type WeightedBackend struct {
	Backend *Backend `json:"backend"`
	Weight  uint32   `json:"weight"`
}

// Backend is one Service port with its endpoints. Backends are shared: the
// same *Backend (same Key) is used by every route that references that
// Service port, so health state and connection pools are per backend.
type Backend struct {
	// Key is "namespace/service:port" and unique in a Snapshot.
	Key string `json:"key"`
	// Service is the Service the backend comes from.
	Service ObjectRef `json:"service"`
	// Endpoints are "host:port" addresses (IP addresses from ready EndpointSlice
	// endpoints or the ClusterIP; a DNS name for ExternalName Services).
	Endpoints []string `json:"endpoints"`
	// Strategy picks an endpoint; RoundRobin when empty.
	Strategy Strategy `json:"strategy,omitempty"`
	// HealthCheck, when set, enables active HTTP health checking.
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// TLS dials the endpoints with TLS (Service port named "https" or
	// appProtocol https). Certificates of upstreams are not verified.
	TLS bool `json:"tls,omitempty"`
	// Port is the Service port the backend serves, kept so that its
	// endpoints can be found again in EndpointSlices that arrive after the
	// revision was cut (live endpoints).
	Port ServicePort `json:"port"`
	// ExternalName marks a backend of an ExternalName Service: its one
	// endpoint is a DNS name, and EndpointSlices never change it.
	ExternalName bool `json:"externalName,omitempty"`
}

// ServicePort is what matching EndpointSlice ports against a Service port
// needs: an EndpointSlice port is taken when its name equals Name; a slice
// without ports serves TargetPort (or Number when the target port is unset or
// named).
type ServicePort struct {
	// Name is the Service port's name ("" for an unnamed port).
	Name string `json:"name,omitempty"`
	// Number is the Service port's number.
	Number int32 `json:"number"`
	// TargetPort is the numeric target port, 0 when unset or named.
	TargetPort int32 `json:"targetPort,omitempty"`
}

// HealthCheck is an active HTTP health check (Contour's healthCheck block).
type HealthCheck struct {
	// Path is requested with GET; a 200 is healthy, a 503 unhealthy at once.
	Path string `json:"path"`
	// Host is the Host header; "revgate-healthcheck" when empty.
	Host string `json:"host,omitempty"`
	// Interval between checks; default 5s.
	Interval time.Duration `json:"interval"`
	// Timeout of one check; default 2s.
	Timeout time.Duration `json:"timeout"`
	// UnhealthyThreshold failures in a row mark an endpoint unhealthy; default 3.
	UnhealthyThreshold int `json:"unhealthyThreshold"`
	// HealthyThreshold successes in a row mark it healthy again; default 5.
	// At start-up one success is enough.
	HealthyThreshold int `json:"healthyThreshold"`
}

// Health-check defaults (Contour's).
const (
	DefaultHealthCheckPath     = "/"
	DefaultHealthCheckHost     = "revgate-healthcheck"
	DefaultHealthCheckInterval = 5 * time.Second
	DefaultHealthCheckTimeout  = 2 * time.Second
	DefaultUnhealthyThreshold  = 3
	DefaultHealthyThreshold    = 5
)

// WithDefaults returns h with every unset field given its default.
func (h HealthCheck) WithDefaults() HealthCheck {
	if h.Path == "" {
		h.Path = DefaultHealthCheckPath
	}
	if h.Host == "" {
		h.Host = DefaultHealthCheckHost
	}
	if h.Interval <= 0 {
		h.Interval = DefaultHealthCheckInterval
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultHealthCheckTimeout
	}
	if h.UnhealthyThreshold <= 0 {
		h.UnhealthyThreshold = DefaultUnhealthyThreshold
	}
	if h.HealthyThreshold <= 0 {
		h.HealthyThreshold = DefaultHealthyThreshold
	}
	return h
}

// CanaryHash says what keeps a client in its bucket.
type CanaryHash string

const (
	CanaryHashConsumer CanaryHash = "consumer"
	CanaryHashIP       CanaryHash = "ip"
	CanaryHashHeader   CanaryHash = "header"
	CanaryHashNone     CanaryHash = "none"
)

// Canary is Kong's Canary Release on a route: Backend is "Service B".
type Canary struct {
	Backend *Backend `json:"backend"`
	// Percentage of buckets sent to the canary, 0-100; nil for a timed rollout.
	Percentage *float64 `json:"percentage,omitempty"`
	// Steps is the number of buckets; default 1000.
	Steps int `json:"steps"`
	// Start and Duration describe a linear timed rollout (used when Percentage
	// is nil); Duration defaults to 1h.
	Start    time.Time     `json:"start,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	// Hash: consumer, ip, header or none; fallback order consumer → ip → none.
	Hash CanaryHash `json:"hash"`
	// HashHeader is the header hashed when Hash is "header".
	HashHeader string `json:"hashHeader,omitempty"`
	// ConsumerHeader identifies a consumer; default "X-Consumer-ID".
	ConsumerHeader string `json:"consumerHeader"`
	// OverrideHeader, when set, names a header whose value "always" forces the
	// canary and "never" forces the primary.
	OverrideHeader string `json:"overrideHeader,omitempty"`
	// UpstreamFallback keeps traffic on the primary while the canary backend
	// has no healthy endpoint.
	UpstreamFallback bool `json:"upstreamFallback,omitempty"`
}

// Certificate is a TLS certificate served by SNI.
type Certificate struct {
	// Hosts are the SNI names it is served for (exact or "*.foo.com").
	Hosts []string `json:"hosts"`
	// Certificate is the parsed key pair (Leaf set).
	Certificate *tls.Certificate `json:"-"`
	// MinVersion is the minimum TLS version for these hosts; never below
	// tls.VersionTLS12 unless an IngressRoute asked for "1.1" explicitly.
	MinVersion uint16 `json:"minVersion"`
	// Secret is the Secret the certificate comes from.
	Secret ObjectRef `json:"secret"`
	// Source is the object that asked for TLS on these hosts.
	Source ObjectRef `json:"source"`
}

// Status of a configuration object.
type Status string

const (
	StatusValid    Status = "valid"
	StatusInvalid  Status = "invalid"
	StatusOrphaned Status = "orphaned"
	// StatusIgnored: not for us (another ingress class, an unknown kind).
	StatusIgnored Status = "ignored"
	// StatusExcluded: valid itself but excluded because an object it depends
	// on is broken.
	StatusExcluded Status = "excluded"
	// StatusBackfilled: served from its last-known-good version.
	StatusBackfilled Status = "backfilled"
)

// ObjectStatus is the outcome for one loaded object (served at
// /debug/config/status and counted in metrics).
type ObjectStatus struct {
	Object ObjectRef `json:"object"`
	File   string    `json:"file,omitempty"`
	Status Status    `json:"status"`
	// InUse is true when the object contributes to what is served.
	InUse bool `json:"inUse"`
	// Description says why (Contour's status description), e.g.
	// "not part of a delegation chain from a root".
	Description string `json:"description,omitempty"`
	// Root is, for a valid IngressRoute, the root that reaches it.
	Root *ObjectRef `json:"root,omitempty"`
	// IsRoot marks an IngressRoute with a spec.virtualhost, valid or not.
	IsRoot bool `json:"isRoot,omitempty"`
	// VirtualHost is, for an IngressRoute, the fqdn it serves under: a root's
	// own, or that of the first root (by namespace and name) delegating to
	// it; empty when no root does. Contour's metrics label objects with it.
	VirtualHost string `json:"virtualHost,omitempty"`
}

// FallbackStatus is "triggered" or "not-triggered".
type FallbackStatus string

const (
	FallbackTriggered    FallbackStatus = "triggered"
	FallbackNotTriggered FallbackStatus = "not-triggered"
)

// FallbackObject is an object in the fallback report, field for field Kong
// Ingress Controller's FallbackAffectedObjectMeta.
type FallbackObject struct {
	// Group is the API group, "" for the core group.
	Group string `json:"group"`
	// Kind is the object kind, e.g. "Ingress".
	Kind string `json:"kind"`
	// Version is the API version of an excluded or backfilled object ("v1",
	// "v1beta1"); Kong leaves it out of broken objects, and so does revgate.
	Version string `json:"version,omitempty"`
	// Namespace is "" for cluster-scoped objects (always present, as in Kong).
	Namespace string `json:"namespace"`
	// Name is the object name.
	Name string `json:"name"`
	// ID is the object's metadata.uid: of the backfilled version for a
	// backfilled object; "" when the configuration does not carry one (files
	// written by hand rarely do).
	ID string `json:"id"`
	// CausingObjects are the broken objects that made this one excluded or
	// backfilled, each rendered as Kong renders them:
	// "group/Kind:namespace/name", the core group written "core"
	// ("core/Service:shop/web"), and "group/Kind:name" for cluster-scoped
	// objects. A broken object is excluded because of itself and lists itself.
	CausingObjects []string `json:"causingObjects,omitempty"`
}

// FallbackReport is served at /debug/config/fallback in the shape of Kong
// Ingress Controller's FallbackResponse. Kong leaves empty lists out; revgate
// always writes the three lists, empty when there is nothing, which decodes
// the same.
type FallbackReport struct {
	Status            FallbackStatus   `json:"status"`
	BrokenObjects     []FallbackObject `json:"brokenObjects"`
	ExcludedObjects   []FallbackObject `json:"excludedObjects"`
	BackfilledObjects []FallbackObject `json:"backfilledObjects"`
}

// FallbackMode is the --fallback flag of revgate proxy.
type FallbackMode string

const (
	// FallbackExclude (default) excludes broken objects and their dependants.
	FallbackExclude FallbackMode = "exclude"
	// FallbackBackfill also serves excluded objects from the last-known-good
	// revision where they exist there.
	FallbackBackfill FallbackMode = "backfill"
	// FallbackOff serves what is valid but fails readiness while any object
	// is broken.
	FallbackOff FallbackMode = "off"
)

// ParseFallbackMode validates a --fallback value.
func ParseFallbackMode(s string) (FallbackMode, error) {
	switch m := FallbackMode(s); m {
	case FallbackExclude, FallbackBackfill, FallbackOff:
		return m, nil
	}
	return "", fmt.Errorf("invalid fallback mode %q: want exclude, backfill or off", s)
}

// Snapshot is one translated configuration, ready to serve.
type Snapshot struct {
	// Revision is the revision the configuration comes from (0 when unknown).
	Revision int `json:"revision"`
	// Routes to serve.
	Routes []Route `json:"routes"`
	// Backends by Key: every backend referenced by a route or canary.
	Backends map[string]*Backend `json:"backends"`
	// Certificates for the HTTPS listener.
	Certificates []Certificate `json:"certificates"`
	// Problems found while loading and translating, errors and warnings.
	Problems []Problem `json:"problems"`
	// Objects is the status of every loaded object.
	Objects []ObjectStatus `json:"objects"`
	// Fallback is the object-level fallback report.
	Fallback FallbackReport `json:"fallback"`
	// Mode is the fallback mode the snapshot was built with.
	Mode FallbackMode `json:"mode"`
	// TranslationDuration is how long loading and translation took.
	TranslationDuration time.Duration `json:"translationDuration"`
	// BuiltAt is when loading and translation started (Contour's "DAG
	// rebuild" time).
	BuiltAt time.Time `json:"builtAt"`
}

// Errors returns the problems of severity error.
func (s *Snapshot) Errors() []Problem {
	var out []Problem
	for _, p := range s.Problems {
		if p.Severity == SeverityError {
			out = append(out, p)
		}
	}
	return out
}
