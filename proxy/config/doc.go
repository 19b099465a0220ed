// Package config turns configuration files on disk into a translated
// model.Snapshot: it loads Kubernetes objects from revision folders or plain
// folders, translates Ingress and IngressRoute objects into routes, shared
// backends and certificates, and applies object-level fallback so that one
// broken object never takes the rest of the configuration down with it.
//
// # Loading
//
// A revision folder (one holding configmaps/ or secrets/) contributes every
// configmaps/<name>/<key> file, whatever its name, and one Secret per
// secrets/<name>/ folder, named <name> in Options.Namespace; the files of
// secrets/_objects/ hold objects, like configmaps/ files (the cluster loop
// writes Secrets of every namespace there, 0600). Its top-level files are
// pod manifests and are not read.
//
// Secrets are not all TLS: a Secret is judged as a TLS key pair only when its
// type is kubernetes.io/tls or, having no type (a secrets/<name>/ folder), it
// holds tls.crt or tls.key. Other Secrets are ignored (carried, not judged).
// A TLS Secret that does not validate is an error (breaking what uses it)
// only when an Ingress or IngressRoute served by revgate references it, and a
// warning otherwise. A plain folder
// contributes its *.yaml, *.yml and *.json files; its sub-folders are not
// read (name them with another --config-dir). Dotfiles are skipped. Files
// hold YAML documents separated by "---", or JSON; a v1 List is unpacked.
// Unknown fields are warnings naming the field, unknown kinds are warnings
// and the objects are "ignored"; a document that does not parse is an error
// naming the file and the document index, and the other documents and files
// still load. Namespaced objects without a namespace get Options.Namespace.
//
// # Ingress (networking.k8s.io/v1)
//
// Class: the kubernetes.io/ingress.class annotation wins over
// spec.ingressClassName (a warning when they differ). An Ingress is served
// when its class is Options.IngressClass, or names an IngressClass whose
// controller is revgate.io/ingress-controller, or when it has no class and a
// default IngressClass (ingressclass.kubernetes.io/is-default-class: "true")
// of revgate is loaded. An Ingress without a class and without such a default
// is ignored, as are Ingresses of other classes; the status says why.
//
// Paths must start with '/' and hold no "//", no dot segment and no escaped
// slash or backslash; they are kept in the canonical form request paths are
// normalized to before matching (route.NormalizePath: unreserved escapes
// decoded, other escapes upper-cased). ImplementationSpecific is
// served as Prefix (element-wise). Prefix paths lose a trailing slash; an
// empty path is "/". Hosts are lower-cased DNS names or "*." followed by one;
// IP addresses and a lone "*" are invalid. When two Ingresses claim the same
// (host, path, pathType), or the default backend, the oldest
// creationTimestamp wins, then namespace/name order; the loser gets a warning
// naming the winner and keeps its other routes. A default backend is dropped
// (with a warning) when a rule already serves any host at "/" as a prefix.
//
// Backends: a Service port by number or name (no port: the Service's only
// port). Endpoints come from the ready endpoints (conditions.ready unset or
// true) of the EndpointSlices labelled kubernetes.io/service-name, on the
// slice port with the Service port's name (the targetPort when a slice lists
// no ports); without any EndpointSlice, the ClusterIP and Service port; for
// ExternalName, the external name and Service port. Loopback addresses are
// accepted. A port named "https" or with appProtocol https is dialled with
// TLS.
//
// # IngressRoute (contour.heptio.com/v1beta1)
//
// Roots carry spec.virtualhost; vertices are reached only through a route's
// delegate. Every IngressRoute is valid (with the root that reaches it first
// in namespace/name order), invalid (with the reason) or orphaned. Invalid:
// a root outside --root-namespaces, an fqdn used by another root (compared
// case-insensitively; all of them are invalid), a missing delegate or
// Service, a bad TLS Secret, a route outside the prefix delegated to the
// object (element-wise), and the object that closes a delegation cycle (the
// message shows the chain). The children of an invalid object are orphaned
// unless another valid parent reaches them.
//
// Weights: when no service of a route has a weight they share evenly; when
// some do, services without a weight get no traffic (as a zero weight); when
// every weight is zero they share evenly again. Strategy and health check
// come from the service, else the route, else the virtual host; a backend
// (one Service port) is shared by every route using it, so when two routes
// ask for different policies on it the first one in walk order (roots in
// namespace/name order, routes in order) is kept and the other gets a
// warning. TLS virtual hosts redirect plain HTTP to HTTPS except on
// permitInsecure routes; their minimum TLS version is 1.2 unless
// minimumProtocolVersion says "1.1" or "1.3".
//
// # Object-level fallback
//
// The dependency graph has the edges IngressClass → Ingress, Service →
// Ingress and IngressRoute, EndpointSlice → Service, TLS Secret → Ingress and
// IngressRoute, and IngressRoute → the IngressRoutes it delegates to. A
// broken object is one with a translation error. See Build for the three
// modes. The report follows Kong's /debug/config/fallback field for field:
// objects with group, kind, version (excluded and backfilled objects),
// namespace, name and id (metadata.uid); excludedObjects lists the broken
// objects themselves too; causingObjects are rendered
// "group/Kind:namespace/name" with the core group written "core".
//
// # Live endpoints
//
// EndpointSlices may also reach a running gateway without a revision: a
// writer (the controller) keeps one file with every EndpointSlice it knows
// and replaces it atomically (WriteEndpointsFile); `revgate proxy
// --endpoints-file` watches it. The file is a v1 List of
// discovery.k8s.io/v1 EndpointSlices sorted by namespace then name, with
// metadata cleaned to name, namespace and labels, so that the same cluster
// state always gives the same bytes (EncodeEndpoints). A file that does not
// decode (DecodeEndpoints) is not applied at all.
//
// A Service with at least one EndpointSlice in the file (linked by the
// kubernetes.io/service-name label, same namespace) takes its endpoints from
// the file only, by the rules above (LiveEndpoints); a slice with no
// endpoints means no endpoints. A Service with no slice in the file keeps
// the endpoints of its revision. Live endpoints change the addresses of the
// backends a revision serves; they never add or remove routes or backends,
// and an ExternalName Service keeps its external name.
package config
