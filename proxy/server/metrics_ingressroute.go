package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/revgate/revgate/proxy/model"
)

// ingressRouteMetrics are the IngressRoute gauges of Contour's IngressRoute
// design (contour_ingressroute_*), under revgate's prefix: how many
// IngressRoutes exist, are orphaned, roots, valid and invalid, by namespace
// (valid and invalid by virtual host too), and when the configuration was
// last built.
type ingressRouteMetrics struct {
	total, orphaned, root, valid, invalid *prometheus.GaugeVec
	rebuild                               prometheus.Gauge
}

func newIngressRouteMetrics() *ingressRouteMetrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	return &ingressRouteMetrics{
		total:    gauge("revgate_ingressroute_total", "IngressRoutes whatever their status: orphaned + valid + invalid.", "namespace"),
		orphaned: gauge("revgate_ingressroute_orphaned_total", "Orphaned IngressRoutes: no root delegates to them.", "namespace"),
		root:     gauge("revgate_ingressroute_root_total", "Root IngressRoutes (with a virtualhost), valid or not.", "namespace"),
		valid:    gauge("revgate_ingressroute_valid_total", "Valid IngressRoutes (backfilled ones included), by the virtual host they serve.", "namespace", "vhost"),
		invalid:  gauge("revgate_ingressroute_invalid_total", "Invalid IngressRoutes (excluded ones included), by virtual host when one is known.", "namespace", "vhost"),
		rebuild: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revgate_ingressroute_dagrebuild_timestamp", Help: "Unix time the configuration being served was last built.",
		}),
	}
}

func (m *ingressRouteMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.total, m.orphaned, m.root, m.valid, m.invalid, m.rebuild}
}

// set counts the IngressRoutes of s from their statuses. Contour knows
// three states; revgate's backfilled objects are served and count as valid,
// excluded ones are not and count as invalid, ignored ones (duplicates) are
// not counted.
func (m *ingressRouteMetrics) set(s *model.Snapshot) {
	for _, g := range []*prometheus.GaugeVec{m.total, m.orphaned, m.root, m.valid, m.invalid} {
		g.Reset()
	}
	for _, o := range s.Objects {
		if o.Object.Kind != "IngressRoute" || o.Status == model.StatusIgnored {
			continue
		}
		ns := o.Object.Namespace
		m.total.WithLabelValues(ns).Inc()
		if o.IsRoot {
			m.root.WithLabelValues(ns).Inc()
		}
		switch o.Status {
		case model.StatusOrphaned:
			m.orphaned.WithLabelValues(ns).Inc()
		case model.StatusValid, model.StatusBackfilled:
			m.valid.WithLabelValues(ns, o.VirtualHost).Inc()
		default:
			m.invalid.WithLabelValues(ns, o.VirtualHost).Inc()
		}
	}
	if !s.BuiltAt.IsZero() {
		m.rebuild.Set(float64(s.BuiltAt.UnixNano()) / 1e9)
	}
}
