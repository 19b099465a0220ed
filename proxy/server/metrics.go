package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/revgate/revgate/proxy/model"
)

// Upstream error kinds (label "kind" of revgate_upstream_errors_total).
const (
	errKindConnect   = "connect"
	errKindTimeout   = "timeout"
	errKindNoHealthy = "no_healthy_endpoint"
	errKindBody      = "body"
)

// Metrics are the gateway's Prometheus metrics, on their own registry.
type Metrics struct {
	Registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	upstreamErrors  *prometheus.CounterVec
	objects         *prometheus.GaugeVec
	fallback        prometheus.Gauge
	fallbackObjects *prometheus.GaugeVec
	translation     prometheus.Gauge
	endpointHealthy *prometheus.GaugeVec
	revision        prometheus.Gauge
	ingressRoutes   *ingressRouteMetrics
}

// NewMetrics registers the gateway's metrics (plus Go and process
// collectors) on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "revgate_http_requests_total", Help: "Requests served, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "revgate_http_request_duration_seconds", Help: "Request latency until the response is complete, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "revgate_upstream_errors_total", Help: "Failed upstream requests, by backend and kind (connect, timeout, no_healthy_endpoint, body).",
		}, []string{"backend", "kind"}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "revgate_config_objects", Help: "Configuration objects by kind and status.",
		}, []string{"kind", "status"}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revgate_fallback_triggered", Help: "1 when object-level fallback excluded or backfilled objects.",
		}),
		fallbackObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "revgate_fallback_objects", Help: "Objects in the fallback report, by state (broken, excluded, backfilled).",
		}, []string{"state"}),
		translation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revgate_config_translation_duration_seconds", Help: "How long loading and translating the configuration took.",
		}),
		endpointHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "revgate_endpoint_healthy", Help: "1 when an endpoint passes its health checks (or has none).",
		}, []string{"backend", "endpoint"}),
		revision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revgate_config_revision", Help: "Revision of the configuration being served.",
		}),
		ingressRoutes: newIngressRouteMetrics(),
	}
	m.Registry.MustRegister(m.ingressRoutes.collectors()...)
	m.Registry.MustRegister(m.requests, m.duration, m.upstreamErrors, m.objects, m.fallback,
		m.fallbackObjects, m.translation, m.endpointHealthy, m.revision,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// setSnapshot records the configuration figures of a snapshot.
func (m *Metrics) setSnapshot(s *model.Snapshot) {
	m.objects.Reset()
	for _, o := range s.Objects {
		m.objects.WithLabelValues(o.Object.Kind, string(o.Status)).Inc()
	}
	if s.Fallback.Status == model.FallbackTriggered {
		m.fallback.Set(1)
	} else {
		m.fallback.Set(0)
	}
	m.fallbackObjects.WithLabelValues("broken").Set(float64(len(s.Fallback.BrokenObjects)))
	m.fallbackObjects.WithLabelValues("excluded").Set(float64(len(s.Fallback.ExcludedObjects)))
	m.fallbackObjects.WithLabelValues("backfilled").Set(float64(len(s.Fallback.BackfilledObjects)))
	m.translation.Set(s.TranslationDuration.Seconds())
	m.revision.Set(float64(s.Revision))
	m.ingressRoutes.set(s)
}

func (m *Metrics) setEndpointHealth(backend, endpoint string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	m.endpointHealthy.WithLabelValues(backend, endpoint).Set(v)
}

// codeText holds status codes as strings so labelling a request does not
// allocate.
var codeText = func() (t [600]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func codeLabel(code int) string {
	if code >= 0 && code < len(codeText) {
		return codeText[code]
	}
	return strconv.Itoa(code)
}
