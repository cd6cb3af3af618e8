package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// outboxMetrics are the run events' series (see the package comment).
type outboxMetrics struct {
	produced, delivered, failed *prometheus.CounterVec
	backlog, oldest             *prometheus.GaugeVec
}

func newOutboxMetrics(f promauto.Factory) outboxMetrics {
	counter := func(name, help, label string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: "migrate", Name: name, Help: help}, []string{label})
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return f.NewGaugeVec(prometheus.GaugeOpts{Namespace: "migrate", Name: name, Help: help}, []string{"sink"})
	}
	return outboxMetrics{
		produced:  counter("outbox_events_produced_total", "Run events written to the outbox with the state change they report.", "type"),
		delivered: counter("outbox_events_delivered_total", "Run events delivered to the sink.", "sink"),
		failed:    counter("outbox_delivery_failures_total", "Delivery attempts that failed; the event is tried again.", "sink"),
		backlog:   gauge("outbox_backlog", "Run events waiting for the sink."),
		oldest:    gauge("outbox_oldest_pending_seconds", "Age of the oldest run event waiting for the sink; 0 when none waits."),
	}
}

// EventProduced counts a run event written to the outbox.
func (m *Metrics) EventProduced(typ string) {
	if m != nil {
		m.outbox.produced.WithLabelValues(typ).Inc()
	}
}

// EventDelivered counts an event delivered to sink.
func (m *Metrics) EventDelivered(sink string) {
	if m != nil {
		m.outbox.delivered.WithLabelValues(sink).Inc()
	}
}

// DeliveryFailed counts a failed attempt to deliver to sink.
func (m *Metrics) DeliveryFailed(sink string) {
	if m != nil {
		m.outbox.failed.WithLabelValues(sink).Inc()
	}
}

// SetOutboxBacklog sets the events waiting for sink and the oldest one's
// age (0 when none waits).
func (m *Metrics) SetOutboxBacklog(sink string, pending int64, oldest time.Duration) {
	if m != nil {
		m.outbox.backlog.WithLabelValues(sink).Set(float64(pending))
		m.outbox.oldest.WithLabelValues(sink).Set(oldest.Seconds())
	}
}
