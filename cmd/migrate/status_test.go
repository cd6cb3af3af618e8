package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/status"
)

// reads returns a reader whose i-th read is plan "p" with i rows done in
// its one shard, failing the second time; after n reads it cancels the
// watch.
func reads(n int, cancel context.CancelFunc) func(context.Context) (*status.Status, error) {
	var i atomic.Int64
	return func(context.Context) (*status.Status, error) {
		k := i.Add(1)
		if k == int64(n) {
			defer cancel()
		}
		if k == 2 {
			return nil, errors.New("target unavailable")
		}
		return &status.Status{Plan: "p", Tables: []status.ShardStatus{{Table: "t", State: "running", RowsDone: k, LastKey: []byte("null")}},
			Totals: []status.TableTotal{{Table: "t", Target: "t", Shards: 1, ShardsRunning: 1, RowsDone: k}}}, nil
	}
}

func TestWatchStatus(t *testing.T) {
	t.Run("text, not a terminal", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var out, errs strings.Builder
		if err := watchStatus(ctx, reads(4, cancel), &out, &errs, time.Millisecond, false, false); err != nil {
			t.Fatal(err)
		}
		// Reads 1 and 3 are shown, 2 failed (on stderr), 4 ended the watch.
		text := out.String()
		if strings.Count(text, "plan p\n") != 2 || strings.Count(text, "(Ctrl-C to stop)\n") != 2 ||
			!strings.Contains(text, "leases: none held\n\n2") || strings.Contains(text, "\x1b[") {
			t.Errorf("want two blocks separated by a blank line, no terminal control:\n%q", out.String())
		}
		if !strings.Contains(errs.String(), "target unavailable") {
			t.Errorf("the failed read is not on stderr: %q", errs.String())
		}
	})
	t.Run("json", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var out, errs strings.Builder
		if err := watchStatus(ctx, reads(4, cancel), &out, &errs, time.Millisecond, true, true); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("want one JSON object per line for reads 1 and 3, got:\n%s", out.String())
		}
		for i, l := range lines {
			var st status.Status
			if err := json.Unmarshal([]byte(l), &st); err != nil || st.Plan != "p" || st.Tables[0].RowsDone != int64(2*i+1) {
				t.Errorf("line %d: %v %+v", i, err, st)
			}
		}
	})
	t.Run("terminal", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var out, errs strings.Builder
		if err := watchStatus(ctx, reads(4, cancel), &out, &errs, time.Millisecond, false, true); err != nil {
			t.Fatal(err)
		}
		frames := strings.Split(out.String(), ansiHome)
		if len(frames) != 4 || frames[0] != ansiClear || !strings.HasSuffix(out.String(), ansiClearDown) {
			t.Fatalf("want the screen cleared once, then three frames from the top left:\n%q", out.String())
		}
		if !strings.Contains(frames[2], "could not be read") || !strings.Contains(frames[2], "target unavailable") || errs.Len() != 0 {
			t.Errorf("the failed read is not in its frame: %q (stderr %q)", frames[2], errs.String())
		}
		if !strings.Contains(frames[3], "plan p"+ansiClearLine+"\n") {
			t.Errorf("a frame's lines do not clear their rest: %q", frames[3])
		}
	})
}
