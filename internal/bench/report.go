package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Environment describes what the figures were measured on, for the
// report's header. Sizes are bytes.
type Environment struct {
	Date      time.Time
	BuildRev  string // the commit bin/migrate was built from
	Cores     int
	MemBytes  int64
	PGVersion string
	PGFsync   string
	PGSync    string // synchronous_commit
	MYVersion string // "" in a fleet-only bench
	MYFlush   string // innodb_flush_log_at_trx_commit
	MYFiles   string // how the MariaDB bulk files are made and loaded
	Redis     string // the Redis version (shown in a fleet-only bench)
}

// Report is everything the report shows.
type Report struct {
	Config  Config
	Env     Environment
	Tables  Tables
	Results *Results
}

// Write writes the report: the header, the table of medians, the change
// stream's table, the goals, the fleet table and what failed; the
// standalone sections (fleet, stream) alone have no table of medians, and
// the fleet alone no goals.
func (rp *Report) Write(w io.Writer) error {
	ew := &errWriter{w: w}
	rp.header(ew)
	sec := rp.Config.Sections
	if !sec.Alone() {
		rp.table(ew)
	}
	if sec.Stream() {
		rp.stream(ew)
	}
	if !sec.Alone() || sec.Stream() {
		rp.goals(ew)
	}
	if sec.Fleet() {
		rp.fleet(ew)
	}
	rp.failed(ew)
	return ew.err
}

func (rp *Report) header(w *errWriter) {
	c, e, t := rp.Config, rp.Env, rp.Tables
	rows := fmt.Sprintf("%d rows, ", c.Rows)
	if c.Sections.Alone() && !c.Sections.Fleet() {
		rows = "" // the change stream's table is its own
	}
	w.printf("\nmigrate bench: %s%d run(s), medians; %s; bin/migrate built from %s\n",
		rows, c.Runs, e.Date.UTC().Format("2006-01-02T15:04Z"), e.BuildRev)
	perRow := func(b int64) string {
		return fmt.Sprintf("%.1f MB (%.0f B/row)", float64(b)/1e6, float64(b)/float64(c.Rows))
	}
	machine := fmt.Sprintf("machine: %d cores, %.0f GiB; PostgreSQL %s fsync=%s synchronous_commit=%s;",
		e.Cores, float64(e.MemBytes)/(1<<30), e.PGVersion, e.PGFsync, e.PGSync)
	if c.Sections.Alone() {
		if c.Sections.Fleet() {
			w.printf("source table: PostgreSQL %s\n", perRow(t.PGBytes))
		}
		w.printf("%s Redis %s\n", machine, e.Redis)
		return
	}
	w.printf("source tables: PostgreSQL %s, MariaDB %s\n", perRow(t.PGBytes), perRow(t.MYBytes))
	w.printf("%s MariaDB %s innodb_flush_log_at_trx_commit=%s\n", machine, e.MYVersion, e.MYFlush)
	w.printf("MariaDB bulk files: %s\n", e.MYFiles)
}

func (rp *Report) table(w *errWriter) {
	w.printf("\n%-44s %9s %10s %8s %9s  %s\n", "what", "median s", "rows/s", "MB/s", "peak RSS", "runs (s)")
	for _, l := range Lines(rp.Config, rp.Tables) {
		m, peak, runs, ok := rp.runs(l.Key, "%.1f")
		if !ok {
			w.printf("%-44s %9s  %s\n", l.Label, "n/a", cut(or(rp.Results.Reason(l.Key), "not run"), 70))
			continue
		}
		rate, mbs := 0.0, 0.0
		if m > 0 {
			rate, mbs = float64(l.Rows)/m, float64(l.Bytes)/m/1e6
		}
		w.printf("%-44s %9.2f %10.0f %8.1f %9s  %s\n", l.Label, m, rate, mbs, peak, runs)
	}
}

// stream is the change stream's table: each consumer's median time to
// apply the backlog, its changes/s, the CPU it used (medians: in migrate's
// process, in the server's processes), migrate's peak RSS and every run.
func (rp *Report) stream(w *errWriter) {
	c := rp.Config
	n := c.StreamBacklog()
	w.printf("\nchange stream PG->PG: %d row changes (40%% updates, 30%% inserts, 30%% deletes, interleaved, 10 per source transaction)\n", n)
	w.printf("made while the consumer is stopped, on a table of %d rows (%.1f MB); timed from the consumer's start until the target holds them\n",
		c.StreamRows, float64(rp.Tables.StreamBytes)/1e6)
	w.printf("\n%-40s %9s %10s %16s %9s  %s\n", "what", "median s", "changes/s", "CPU s client+srv", "peak RSS", "runs (s)")
	for _, l := range []struct{ key, label string }{
		{"stream.native", "PG->PG  PostgreSQL subscription"},
		{"stream.migrate", "PG->PG  migrate run --follow (applier)"},
	} {
		m, peak, runs, ok := rp.runs(l.key, "%.2f")
		if !ok {
			w.printf("%-40s %9s  %s\n", l.label, "n/a", cut(or(rp.Results.Reason(l.key), "not run"), 70))
			continue
		}
		cpu := ""
		if client, server := rp.Results.MedianCPU(l.key); client.Valid {
			cpu = fmt.Sprintf("%.2f + %.2f", client.V, server.V)
		}
		w.printf("%-40s %9.2f %10.0f %16s %9s  %s\n", l.label, m, Rate(float64(n), Some(m)).V, cpu, peak, runs)
	}
}

// runs is a measurement's median seconds, its peak RSS ("" unknown) and
// every run's seconds in format; ok=false when it has no sample.
func (rp *Report) runs(key, format string) (median float64, peak, runs string, ok bool) {
	samples := rp.Results.Samples(key)
	if len(samples) == 0 {
		return 0, "", "", false
	}
	var rss int64
	var b strings.Builder
	for _, s := range samples {
		rss = max(rss, s.RSSKB)
		fmt.Fprintf(&b, " "+format, s.Seconds)
	}
	if rss > 0 {
		peak = fmt.Sprintf("%.1f MB", float64(rss)/1024)
	}
	return rp.Results.Median(key).V, peak, b.String(), true
}

func (rp *Report) goals(w *errWriter) {
	w.printf("\n%-52s %9s %8s  %s\n", "goal", "figure", "target", "verdict")
	for _, g := range Goals(rp.Config, rp.Results, rp.Tables.MYBulk) {
		if !g.Value.Valid {
			w.printf("%-52s %9s %8s  n/a\n", g.Label, "n/a", g.target())
			continue
		}
		w.printf("%-52s %9.2f %8s  %s\n", g.Label, g.Value.V, g.target(), g.Verdict())
	}
}

func (rp *Report) failed(w *errWriter) {
	fs := rp.Results.Failures()
	if len(fs) == 0 {
		return
	}
	w.printf("\nfailed or not measured:\n")
	for _, f := range fs {
		w.printf("  %s: %s\n", f.Key, cut(f.Reason, 160))
	}
}

// cut is s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// errWriter keeps the first write error, so the report is written without
// an error check on every line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
