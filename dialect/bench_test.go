package dialect

import (
	"bytes"
	"testing"
	"time"
)

// The hot functions of a copy, per batch of 1000 rows like the issue's
// (~250 bytes: bigint, uuid, two texts, numeric, short text, two
// timestamps, a nullable text, boolean), with their allocations.

var benchCols = []Column{{Name: "id", Base: "bigint"}, {Name: "ext", Base: "uuid"}, {Name: "a", Base: "text"}, {Name: "b", Base: "text"},
	{Name: "amount", Base: "numeric"}, {Name: "code", Base: "text"}, {Name: "created", Base: "timestamp with time zone"},
	{Name: "updated", Base: "timestamp without time zone"}, {Name: "note", Base: "text"}, {Name: "ok", Base: "boolean"}}

func benchRows() [][]any {
	at := time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.UTC)
	rows := make([][]any, 1000)
	for i := range rows {
		var note any = "a nullable note of sixty characters, more or less, with\ttabs"
		if i%10 == 0 {
			note = nil
		}
		rows[i] = []any{int64(i), "0b9e5a4c-5f3e-4b8e-9a77-1d2e3f405162", "customer name number one", "an address line, 12 Main Street, Springfield",
			"12345.67", "AB-123", at, at, note, i%2 == 0}
	}
	return rows
}

func BenchmarkPgCopyText(b *testing.B) { benchEncode(b, benchCols, pgCopyText) }

func BenchmarkMyLoadText(b *testing.B) {
	cols := make([]Column, len(benchCols))
	copy(cols, benchCols)
	cols[6].Base, cols[7].Base = "datetime", "datetime"
	benchEncode(b, cols, myLoadText)
}

// benchEncode measures encodeRows, the bulk path's encoder, with field.
func benchEncode(b *testing.B, cols []Column, field func([]byte, any, Column) ([]byte, bool)) {
	rows := benchRows()
	b.ReportAllocs()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := encodeRows(&buf, cols, 7, rows, field); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}

func BenchmarkUpsertSQL(b *testing.B) {
	names := make([]string, len(benchCols))
	for i, c := range benchCols {
		names[i] = c.Name
	}
	for _, d := range []Dialect{Postgres{}, MySQL{}} {
		b.Run(string(d.Engine()), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = d.Upsert([]string{"orders"}, names, []string{"id"}, "_fence", 1000)
			}
		})
	}
}

func BenchmarkChecksumSQL(b *testing.B) {
	for _, d := range []Dialect{Postgres{}, MySQL{}} {
		b.Run(string(d.Engine()), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = d.Checksum([]string{"orders"}, benchCols, []string{"id"}, true, true)
			}
		})
	}
}
