package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IngressRouteGroup is the API group of IngressRoute.
const IngressRouteGroup = "contour.heptio.com"

// IngressRoute is Contour's contour.heptio.com/v1beta1 IngressRoute: a root
// (with a virtual host) or a vertex reachable only through delegation.
type IngressRoute struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta is the standard object metadata; namespace defaults to "default".
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the routing configuration.
	Spec IngressRouteSpec `json:"spec"`
	// Status is accepted and ignored: revgate computes its own status.
	Status *IngressRouteStatus `json:"status,omitempty"`
}

// IngressRouteSpec is the body of an IngressRoute.
type IngressRouteSpec struct {
	// VirtualHost makes the object a root; absent on vertices.
	VirtualHost *VirtualHost `json:"virtualhost,omitempty"`
	// Routes are the routes of this object; required and non-empty.
	Routes []IngressRouteRoute `json:"routes"`
}

// VirtualHost is the virtual host of a root IngressRoute.
type VirtualHost struct {
	// Fqdn is the fully qualified host name served, compared case-insensitively;
	// unique across roots.
	Fqdn string `json:"fqdn"`
	// TLS, when set, serves the virtual host over HTTPS and redirects plain
	// HTTP with a 301 except on permitInsecure routes.
	TLS *IngressRouteTLS `json:"tls,omitempty"`
	// Strategy is the load-balancing strategy of every service of the virtual
	// host unless a route or service sets its own; default RoundRobin.
	Strategy string `json:"strategy,omitempty"`
	// HealthCheck is the active health check of every service of the virtual
	// host unless a route or service sets its own; default none.
	HealthCheck *IngressRouteHealthCheck `json:"healthCheck,omitempty"`
}

// IngressRouteTLS is the TLS configuration of a virtual host.
type IngressRouteTLS struct {
	// SecretName is a kubernetes.io/tls Secret in the root's namespace whose
	// certificate covers the fqdn; required.
	SecretName string `json:"secretName"`
	// MinimumProtocolVersion is "1.1", "1.2" or "1.3"; default "1.2". "1.1" is
	// honoured only when asked for explicitly.
	MinimumProtocolVersion string `json:"minimumProtocolVersion,omitempty"`
}

// IngressRouteRoute is one route: a prefix match and either services or a
// delegation.
type IngressRouteRoute struct {
	// Match is the path prefix, matched element-wise like an Ingress Prefix
	// path; must start with '/'.
	Match string `json:"match"`
	// Services receive the traffic of this route, in proportion to their weights.
	Services []IngressRouteService `json:"services,omitempty"`
	// Service is the design document's spelling of Services, accepted for
	// manifests written after it; set one of the two.
	Service []IngressRouteService `json:"service,omitempty"`
	// Delegate hands this prefix to another IngressRoute.
	Delegate *IngressRouteDelegate `json:"delegate,omitempty"`
	// PermitInsecure serves this route over plain HTTP on a TLS virtual host
	// instead of redirecting; default false.
	PermitInsecure bool `json:"permitInsecure,omitempty"`
	// Strategy is the load-balancing strategy of the route's services unless a
	// service sets its own; default: the virtual host's.
	Strategy string `json:"strategy,omitempty"`
	// HealthCheck is the active health check of the route's services unless a
	// service sets its own; default: the virtual host's.
	HealthCheck *IngressRouteHealthCheck `json:"healthCheck,omitempty"`
	// Canary diverts a share of the route's requests to another service.
	Canary *IngressRouteCanary `json:"canary,omitempty"`
}

// IngressRouteService is a Service port receiving traffic from a route.
type IngressRouteService struct {
	// Name of a Service in the IngressRoute's namespace; required.
	Name string `json:"name"`
	// Port is the Service port number; required.
	Port int32 `json:"port"`
	// Weight is the share of traffic. When no service of the route has a
	// weight, they share evenly; when some do, services without one get none.
	// When every weight is zero, they share evenly.
	Weight *uint32 `json:"weight,omitempty"`
	// Strategy is RoundRobin, WeightedLeastRequest or Random; default: the
	// route's.
	Strategy string `json:"strategy,omitempty"`
	// HealthCheck of this service; default: the route's.
	HealthCheck *IngressRouteHealthCheck `json:"healthCheck,omitempty"`
}

// IngressRouteDelegate names the IngressRoute a prefix is delegated to.
type IngressRouteDelegate struct {
	// Name of the IngressRoute; required.
	Name string `json:"name"`
	// Namespace of the IngressRoute; default: the delegating object's.
	Namespace string `json:"namespace,omitempty"`
}

// IngressRouteHealthCheck is an active HTTP health check.
type IngressRouteHealthCheck struct {
	// Path is requested with GET; required, starts with '/'.
	Path string `json:"path"`
	// Host is the Host header; default "revgate-healthcheck".
	Host string `json:"host,omitempty"`
	// IntervalSeconds between checks; default 5.
	IntervalSeconds int64 `json:"intervalSeconds,omitempty"`
	// TimeoutSeconds of one check; default 2.
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
	// UnhealthyThresholdCount failures in a row mark an endpoint unhealthy;
	// default 3.
	UnhealthyThresholdCount int `json:"unhealthyThresholdCount,omitempty"`
	// HealthyThresholdCount successes in a row mark it healthy; default 5.
	HealthyThresholdCount int `json:"healthyThresholdCount,omitempty"`
}

// IngressRouteCanary is a Kong-style canary release on a route.
type IngressRouteCanary struct {
	// Service is the canary ("Service B"), in the IngressRoute's namespace; required.
	Service IngressRouteCanaryService `json:"service"`
	// Percentage of buckets sent to the canary, 0-100. Without it, the
	// canary is a timed rollout from Start over Duration.
	Percentage *float64 `json:"percentage,omitempty"`
	// Steps is the number of buckets; default 1000.
	Steps *int `json:"steps,omitempty"`
	// Start of a linear timed rollout, in seconds since the epoch; exclusive
	// with Percentage. Default, as Kong's "now": Options.ConfigTime, the
	// moment the revision was installed, so that the rollout neither restarts
	// when the proxy does nor differs between two processes of one revision.
	Start *int64 `json:"start,omitempty"`
	// Duration of the timed rollout in seconds; default 3600.
	Duration *int64 `json:"duration,omitempty"`
	// Hash is consumer, ip, header or none; default consumer, as Kong's. A
	// request without a consumer falls back to its client ip, and one without
	// either to none (even spreading).
	Hash string `json:"hash,omitempty"`
	// HashHeader is the header hashed when Hash is "header"; required then.
	HashHeader string `json:"hashHeader,omitempty"`
	// ConsumerHeader identifies a consumer; default "X-Consumer-ID".
	ConsumerHeader string `json:"consumerHeader,omitempty"`
	// OverrideHeader names a header whose value "always" forces the canary
	// and "never" the primary; default none.
	OverrideHeader string `json:"overrideHeader,omitempty"`
	// UpstreamFallback keeps traffic on the primary while the canary has no
	// healthy endpoint; default false.
	UpstreamFallback bool `json:"upstreamFallback,omitempty"`
}

// IngressRouteCanaryService is the canary Service port.
type IngressRouteCanaryService struct {
	// Name of a Service in the IngressRoute's namespace; required.
	Name string `json:"name"`
	// Port is the Service port number; required.
	Port int32 `json:"port"`
}

// IngressRouteStatus is Contour's status block; read and ignored.
type IngressRouteStatus struct {
	// CurrentStatus is valid, invalid or orphaned.
	CurrentStatus string `json:"currentStatus,omitempty"`
	// Description says why.
	Description string `json:"description,omitempty"`
}
