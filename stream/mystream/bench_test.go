package mystream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/stream"
)

// BenchmarkCapture reads 100k row changes committed in 1k-row transactions
// (inserts of a row of several types), from Open to the last Tx, and
// reports changes/s.
func BenchmarkCapture(b *testing.B) {
	const txs, perTx = 100, 1000
	src := newSource(b)
	src.exec(b, "CREATE TABLE bench (id BIGINT PRIMARY KEY, n INT UNSIGNED, d DECIMAL(12,2), v VARCHAR(64), t DATETIME(6), j JSON)")
	ctx := context.Background()
	c := New(src.dsn, "bench", 0)
	b.Cleanup(func() { _ = c.Stop(ctx, false) })
	pos, err := c.Start(ctx, tablesOf(src.schema, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range txs {
		var sb strings.Builder
		sb.WriteString("INSERT INTO bench VALUES ")
		for j := range perTx {
			id := i*perTx + j
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d, %d, %d.25, 'row %d ✓', '2024-01-02 03:04:05.%06d', '{\"id\": %d}')", id, id, id, id, j, id)
		}
		src.exec(b, sb.String())
	}
	b.ResetTimer()
	for range b.N {
		r, err := c.Open(ctx, pos)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		n := 0
		var last stream.Tx
		for n < txs*perTx {
			tx := nextTx(b, r)
			n += len(tx.Changes)
			last = tx
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "changes/s")
		if got := last.Changes[len(last.Changes)-1].New[0]; got != int64(txs*perTx-1) {
			b.Fatalf("last change's id %v", got)
		}
		_ = r.Close()
	}
}
