// Package metrics exposes a run's progress and recovery to Prometheus
// (SPEC §7) on --metrics-addr, at /metrics.
//
// Every series carries the constant label plan; per-shard series also carry
// table and shard. Counters count events in this process since it started;
// gauges hold the latest value this process saw.
//
// Progress:
//   - migrate_rows_written_total (counter): rows written to the target in
//     committed batches.
//   - migrate_batches_committed_total (counter): batches committed with a
//     valid fence token.
//   - migrate_batches_failed_total (counter): batches that failed and were
//     rolled back; max_retries consecutive failures halt the shard.
//   - migrate_recovery_backlog_rows (gauge): rows left to copy in the shard.
//   - migrate_oldest_task_age_seconds (gauge, plan only): the longest time any
//     shard running here has gone without its cursor moving; 0 when none runs.
//     A value that keeps growing means a stuck shard.
//   - migrate_shard_state (gauge, label state): 1 for the shard's current state
//     (pending, running, done, halted, standby), 0 for the others.
//
// Leases and fencing:
//   - migrate_takeovers_total (counter): shards this instance took over from
//     a previous holder.
//   - migrate_lease_expiry_reclaims_total (counter): the subset of takeovers
//     where the previous holder's lease had expired (it crashed or stalled),
//     as opposed to being released cleanly.
//   - migrate_recovery_failures_total (counter): takeovers whose business
//     recovery (takeover transaction or resume-point verification) failed.
//     Not a lease problem: look at the data or the databases.
//   - migrate_stale_token_rejections_total (counter): writes refused by the
//     target because a newer fence token exists.
//   - migrate_lease_renewal_failures_total (counter): lease renewals that
//     failed (Redis unreachable or the lease lost).
//   - migrate_self_fence_stops_total (counter): times this holder stopped
//     writing on its own because its lease deadline passed or its token was
//     refused.
//   - migrate_shards_halted_total (counter): shards set halted; each needs an
//     operator (`migrate resume`).
//   - migrate_fence_token (gauge): the fence token this instance holds.
//
// Change stream (migrate run --follow):
//   - migrate_stream_transactions_total, migrate_stream_changes_total
//     (counters): source transactions and row changes the applier committed.
//   - migrate_stream_lag_seconds, migrate_stream_lag_bytes (gauges): how far
//     the capture is behind the source after the applier's last commit.
//
// Recovery time (SPEC §6), from the last takeover of each shard:
//   - migrate_last_rto_seconds (gauge): the recovery time objective achieved,
//     wait + elect + recover + verify.
//   - migrate_last_rto_part_seconds (gauge, label part=wait|elect|recover|verify):
//     its parts; wait is from the old holder's last renewal to the acquire.
//   - migrate_predicted_rto_seconds (gauge): the RTO the runner predicted for
//     the shard's last takeover; compare with migrate_last_rto_seconds.
//   - migrate_rto_seconds (histogram, label table only): all RTOs observed.
//
// Verification:
//   - migrate_verify_differences (gauge, labels table, kind=missing|extra|changed):
//     rows that differ between source and target in the last verification.
//
// Run events (the outbox, SPEC §4; label type or sink):
//   - migrate_outbox_events_produced_total (counter, label type): events
//     this instance wrote to the outbox, with the state change they report.
//   - migrate_outbox_events_delivered_total (counter, label sink): events
//     delivered (a 2xx answer, a command's exit 0).
//   - migrate_outbox_delivery_failures_total (counter, label sink): attempts
//     that failed; the event is tried again after a backoff.
//   - migrate_outbox_backlog (gauge, label sink): events waiting for the
//     sink, as the deliverer last counted them.
//   - migrate_outbox_oldest_pending_seconds (gauge, label sink): the age of
//     the oldest of them; 0 when none waits.
//
// The standard go_* and process_* collectors are registered too.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// States are the shard states reported by migrate_shard_state.
var States = []string{"pending", "running", "done", "halted", "standby"}

// RTOBuckets are the migrate_rto_seconds buckets, in seconds: an RTO is about
// one lease TTL (2–60 s) plus election, recovery and verification.
var RTOBuckets = []float64{1, 2, 3, 5, 8, 13, 20, 30, 45, 60, 90, 120, 180, 300}

// Takeover describes one takeover of a shard (SPEC §6).
type Takeover struct {
	Wait, Elect, Recover, Verify time.Duration // the parts of RTO
	RTO                          time.Duration // their sum, along the critical path
	Predicted                    time.Duration // the RTO predicted before the takeover
	Token                        int64         // the new fence token
	Expired                      bool          // the previous lease expired: a lease expiry reclaim
}

// Metrics records a run's metrics in its own registry. A nil *Metrics is
// valid and records nothing, so callers need not check whether metrics are
// enabled. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	rows, committed, failed       *prometheus.CounterVec
	takeovers, reclaims, recFails *prometheus.CounterVec
	stale, renewFails, selfFenced *prometheus.CounterVec
	halted                        *prometheus.CounterVec
	backlog, token                *prometheus.GaugeVec
	lastRTO, rtoPart, predicted   *prometheus.GaugeVec
	rto                           *prometheus.HistogramVec
	diffs, state                  *prometheus.GaugeVec
	streamTxs, streamChanges      prometheus.Counter
	lagSeconds, lagBytes          prometheus.Gauge
	outbox                        outboxMetrics

	now   func() time.Time
	mu    sync.Mutex
	moved map[shardKey]time.Time // running shards → when their cursor last moved
}

type shardKey struct {
	table string
	shard int
}

// New returns Metrics for plan with a fresh registry holding the migrate_*,
// go_* and process_* collectors, all labelled plan=<plan>.
func New(plan string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), now: time.Now, moved: make(map[shardKey]time.Time)}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"plan": plan}, m.reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := promauto.With(reg)
	shard := []string{"table", "shard"}
	counter := func(name, help string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Namespace: "migrate", Name: name, Help: help}, shard)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return f.NewGaugeVec(prometheus.GaugeOpts{Namespace: "migrate", Name: name, Help: help}, labels)
	}

	m.rows = counter("rows_written_total", "Rows written to the target in committed batches.")
	m.committed = counter("batches_committed_total", "Batches committed under a valid fence token.")
	m.failed = counter("batches_failed_total", "Batches that failed and were rolled back.")
	m.takeovers = counter("takeovers_total", "Shards taken over from a previous holder.")
	m.reclaims = counter("lease_expiry_reclaims_total", "Takeovers after the previous holder's lease expired.")
	m.recFails = counter("recovery_failures_total", "Takeovers whose business recovery failed.")
	m.stale = counter("stale_token_rejections_total", "Writes refused because a newer fence token exists.")
	m.renewFails = counter("lease_renewal_failures_total", "Failed lease renewals.")
	m.selfFenced = counter("self_fence_stops_total", "Times this holder stopped writing: lease deadline passed or token refused.")
	m.halted = counter("shards_halted_total", "Shards set halted; each needs an operator.")
	m.backlog = gauge("recovery_backlog_rows", "Rows left to copy in the shard.", shard...)
	m.token = gauge("fence_token", "Fence token held by this instance.", shard...)
	m.lastRTO = gauge("last_rto_seconds", "RTO of the shard's last takeover.", shard...)
	m.rtoPart = gauge("last_rto_part_seconds", "Parts of the last RTO: wait, elect, recover, verify.", "table", "shard", "part")
	m.predicted = gauge("predicted_rto_seconds", "Predicted RTO of the shard.", shard...)
	m.diffs = gauge("verify_differences", "Rows differing in the last verification, by kind.", "table", "kind")
	m.state = gauge("shard_state", "1 for the shard's current state, 0 for the others.", "table", "shard", "state")
	m.rto = f.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "migrate", Name: "rto_seconds", Help: "RTO of takeovers.", Buckets: RTOBuckets,
	}, []string{"table"})
	m.streamTxs = f.NewCounter(prometheus.CounterOpts{Namespace: "migrate", Name: "stream_transactions_total", Help: "Source transactions the change stream's applier committed."})
	m.streamChanges = f.NewCounter(prometheus.CounterOpts{Namespace: "migrate", Name: "stream_changes_total", Help: "Row changes the change stream's applier committed."})
	m.lagSeconds = f.NewGauge(prometheus.GaugeOpts{Namespace: "migrate", Name: "stream_lag_seconds", Help: "Age of the last source transaction the capture read; 0 when caught up."})
	m.lagBytes = f.NewGauge(prometheus.GaugeOpts{Namespace: "migrate", Name: "stream_lag_bytes", Help: "Source log between the capture's position and the source's end (-1: unknown)."})
	m.outbox = newOutboxMetrics(f)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "migrate", Name: "oldest_task_age_seconds",
		Help: "Longest time a running shard's cursor has not moved; 0 when none runs.",
	}, m.oldestAge)
	return m
}

func labels(table string, shard int) []string { return []string{table, strconv.Itoa(shard)} }

func inc(c *prometheus.CounterVec, table string, shard int) {
	c.WithLabelValues(labels(table, shard)...).Inc()
}

// RowsWritten adds n rows written by a committed batch.
func (m *Metrics) RowsWritten(table string, shard int, n int64) {
	if m != nil {
		m.rows.WithLabelValues(labels(table, shard)...).Add(float64(n))
	}
}

// BatchCommitted counts a committed batch.
func (m *Metrics) BatchCommitted(table string, shard int) {
	if m != nil {
		inc(m.committed, table, shard)
	}
}

// BatchFailed counts a failed, rolled-back batch.
func (m *Metrics) BatchFailed(table string, shard int) {
	if m != nil {
		inc(m.failed, table, shard)
	}
}

// Takeover records a takeover: its count, whether it reclaimed an expired
// lease, its RTO and parts, the predicted RTO and the new fence token.
func (m *Metrics) Takeover(table string, shard int, t Takeover) {
	if m == nil {
		return
	}
	l := labels(table, shard)
	m.takeovers.WithLabelValues(l...).Inc()
	if t.Expired {
		m.reclaims.WithLabelValues(l...).Inc()
	}
	m.lastRTO.WithLabelValues(l...).Set(t.RTO.Seconds())
	m.rto.WithLabelValues(table).Observe(t.RTO.Seconds())
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"wait", t.Wait}, {"elect", t.Elect}, {"recover", t.Recover}, {"verify", t.Verify}} {
		m.rtoPart.WithLabelValues(table, l[1], p.name).Set(p.d.Seconds())
	}
	m.predicted.WithLabelValues(l...).Set(t.Predicted.Seconds())
	m.token.WithLabelValues(l...).Set(float64(t.Token))
}

// RecoveryFailed counts a takeover whose business recovery failed.
func (m *Metrics) RecoveryFailed(table string, shard int) {
	if m != nil {
		inc(m.recFails, table, shard)
	}
}

// StaleRejected counts a write refused for a stale fence token.
func (m *Metrics) StaleRejected(table string, shard int) {
	if m != nil {
		inc(m.stale, table, shard)
	}
}

// RenewalFailed counts a failed lease renewal.
func (m *Metrics) RenewalFailed(table string, shard int) {
	if m != nil {
		inc(m.renewFails, table, shard)
	}
}

// SelfFenced counts a holder stopping its own writes because its lease
// deadline passed or its token was refused.
func (m *Metrics) SelfFenced(table string, shard int) {
	if m != nil {
		inc(m.selfFenced, table, shard)
	}
}

// Halted counts a shard set halted and sets its state to halted.
func (m *Metrics) Halted(table string, shard int) {
	if m != nil {
		inc(m.halted, table, shard)
		m.SetState(table, shard, "halted")
	}
}

// SetBacklog sets the rows left to copy in the shard.
func (m *Metrics) SetBacklog(table string, shard int, rows int64) {
	if m != nil {
		m.backlog.WithLabelValues(labels(table, shard)...).Set(float64(rows))
	}
}

// SetToken sets the fence token this instance holds for the shard.
func (m *Metrics) SetToken(table string, shard int, token int64) {
	if m != nil {
		m.token.WithLabelValues(labels(table, shard)...).Set(float64(token))
	}
}

// CursorMoved records that a running shard's cursor moved at at. It is
// ignored for a shard that is not running (see SetState).
func (m *Metrics) CursorMoved(table string, shard int, at time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.moved[shardKey{table, shard}]; ok {
		m.moved[shardKey{table, shard}] = at
	}
}

// SetState sets the shard's state, one of States. Entering running starts
// its clock for migrate_oldest_task_age_seconds; any other state removes it.
func (m *Metrics) SetState(table string, shard int, state string) {
	if m == nil {
		return
	}
	l := labels(table, shard)
	for _, s := range States {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(l[0], l[1], s).Set(v)
	}
	m.state.WithLabelValues(l[0], l[1], state).Set(1) // also an unknown state
	m.mu.Lock()
	defer m.mu.Unlock()
	k := shardKey{table, shard}
	if _, ok := m.moved[k]; state == "running" && !ok {
		m.moved[k] = m.now()
	} else if state != "running" {
		delete(m.moved, k)
	}
}

// VerifyDifferences sets the differences found by the last verification of table.
func (m *Metrics) VerifyDifferences(table string, missing, extra, changed int64) {
	if m == nil {
		return
	}
	m.diffs.WithLabelValues(table, "missing").Set(float64(missing))
	m.diffs.WithLabelValues(table, "extra").Set(float64(extra))
	m.diffs.WithLabelValues(table, "changed").Set(float64(changed))
}

// oldestAge is migrate_oldest_task_age_seconds, computed at scrape time.
func (m *Metrics) oldestAge() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, age := m.now(), time.Duration(0)
	for _, at := range m.moved {
		age = max(age, now.Sub(at))
	}
	return age.Seconds()
}

// Handler serves the registry in the Prometheus exposition format; for a nil
// *Metrics it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// StreamApplied counts a committed applier transaction and sets the lag.
func (m *Metrics) StreamApplied(txs, changes int, lagSeconds float64, lagBytes int64) {
	if m != nil {
		m.streamTxs.Add(float64(txs))
		m.streamChanges.Add(float64(changes))
		m.lagSeconds.Set(lagSeconds)
		m.lagBytes.Set(float64(lagBytes))
	}
}
