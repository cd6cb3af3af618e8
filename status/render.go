package status

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Render writes st as `migrate status` shows it: per table the shards
// done, rows, rate and ETA; per shard its checkpoint, rate, ETA, fence
// watermark and last takeover; the post-load phase; the live leases.
func Render(w io.Writer, st *Status) error {
	fmt.Fprintf(w, "plan %s\n", st.Plan)
	if len(st.Tables) == 0 {
		fmt.Fprintln(w, "no checkpoints yet: the plan has not run against this target")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.Tables) > 0 {
		fmt.Fprintln(tw, "TABLE\tSHARDS DONE\tRUNNING\tROWS\tESTIMATED\tRATE\tETA")
		for _, t := range st.Totals {
			est := "-"
			if t.RowsEstimated != nil {
				est = fmt.Sprint(*t.RowsEstimated)
			}
			fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\n", t.Table, t.ShardsDone, t.Shards, t.ShardsRunning, t.RowsDone, est, Rate(t.RowsPerSec), ETA(t.EtaMs))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(tw, "TABLE\tSHARD\tSTATE\tROWS\tRATE\tETA\tLAST KEY\tTOKEN\tWATERMARK\tUPDATED\tTAKEOVERS\tLAST RTO")
	for _, t := range st.Tables {
		last := string(t.LastKey)
		if last == "null" {
			last = "-"
		}
		rto := "-"
		if tk := parseTakeover(t.LastTakeover); tk != nil {
			rto = fmt.Sprintf("%dms (predicted <= %dms)", tk.RtoMs, tk.PredictedRtoMs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", t.Table, t.Shard, t.State, t.RowsDone, Rate(t.RowsPerSec), ETA(t.EtaMs), last, t.Token, t.Watermark, t.UpdatedAt, t.Takeovers, rto)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if pl := st.PostLoad; pl != nil {
		fmt.Fprintf(w, "post-load phase: %s, %d of %d indexes and foreign keys created\n", pl.State, pl.StepsDone, pl.Steps)
	}
	if s := st.Stream; s != nil {
		fmt.Fprintf(w, "change stream: %s at %s, %d changes in %d transactions applied, lag %s (%s)",
			s.State, s.Pos, s.Changes, s.Transactions, time.Duration(s.LagMs)*time.Millisecond, bytesText(s.LagBytes))
		if s.RetainedBytes != nil {
			fmt.Fprintf(w, ", source keeps %s of log for it", bytesText(*s.RetainedBytes))
		}
		fmt.Fprintln(w)
	}
	for _, t := range st.Tables {
		if t.HaltReason != "" {
			fmt.Fprintf(w, "halted %s#%d: %s\n  resume with: %s\n", t.Table, t.Shard, t.HaltReason, t.ResumeCommand)
		}
	}
	RenderNotify(w, st.Notify)
	if len(st.Leases) == 0 {
		fmt.Fprintln(w, "leases: none held")
	}
	for _, l := range st.Leases {
		ttl := fmt.Sprintf("ttl %dms", l.TTLMs)
		if l.TTLMs == 0 { // ZooKeeper: a session's time left is the server's alone
			ttl = "ttl not told by the lock service"
		}
		fmt.Fprintf(w, "lease %s#%d held by %s, token %d, %s\n", l.Table, l.Shard, l.Owner, l.Token, ttl)
	}
	return nil
}

// Rate shows rows per second, "-" when unknown.
func Rate(perSec *float64) string {
	if perSec == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f rows/s", *perSec)
}

// ETA shows time left, "-" when unknown.
func ETA(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).Round(time.Second).String()
}

// bytesText shows a size, "unknown" when negative.
func bytesText(n int64) string {
	switch {
	case n < 0:
		return "unknown bytes"
	case n < 1<<20:
		return fmt.Sprintf("%d bytes", n)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// RenderNotify shows each sink's delivery of the plan's events.
func RenderNotify(w io.Writer, sinks []SinkStatus) {
	for _, s := range sinks {
		fmt.Fprintf(w, "events to %s (%s): %d delivered, %d pending", s.Name, s.Kind, s.Delivered, s.Pending)
		if s.OldestPendingMs != nil {
			fmt.Fprintf(w, ", oldest %s", (time.Duration(*s.OldestPendingMs) * time.Millisecond).Round(time.Second))
		}
		if s.GivenUp > 0 {
			fmt.Fprintf(w, ", %d given up (see `migrate events --pending`)", s.GivenUp)
		}
		if s.Disabled {
			fmt.Fprint(w, ", DISABLED by a 410 answer (`migrate events enable`)")
		}
		if s.LastError != "" {
			fmt.Fprintf(w, ", last error: %s", s.LastError)
		}
		fmt.Fprintln(w)
	}
}
