package pgstream

import (
	"context"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/stream"
)

// BenchmarkCapture reads 100k row changes (inserts of a few typed columns)
// committed in transactions of 1k rows, from the WAL to stream.Tx values;
// the writes happen before the timer starts.
func BenchmarkCapture(b *testing.B) {
	const txs, rows = 100, 1000
	e := newEnv(b)
	e.exec(`CREATE TABLE bench (id bigint PRIMARY KEY, n int, note text, at timestamptz, amount numeric(12,2))`)
	pos := e.start([2]string{"public", "bench"})
	var changes int64
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for k := 0; k < txs; k++ {
			first := (i*txs+k)*rows + 1
			if _, err := e.db.Exec(`INSERT INTO bench SELECT g, g % 1000, 'row ' || g, now(), g / 100.0 FROM generate_series($1::bigint, $2::bigint) g`, first, first+rows-1); err != nil {
				b.Fatal(err)
			}
		}
		r, err := e.c.Open(context.Background(), pos)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		var last stream.Pos
		for k := 0; k < txs; k++ {
			tx := next(b, r)
			if len(tx.Changes) != rows {
				b.Fatalf("tx of %d changes, want %d", len(tx.Changes), rows)
			}
			changes += int64(len(tx.Changes))
			last = tx.End
		}
		elapsed += time.Since(t0)
		b.StopTimer()
		r.Ack(last)
		_ = r.Close()
		pos = last
		b.StartTimer()
	}
	b.ReportMetric(float64(changes)/elapsed.Seconds(), "changes/s")
}
