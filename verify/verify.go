// Package verify proves a copy right: it reads the source and the target
// table in the same key order, as two streams, and merges them, comparing
// every row by canonical value (canon.go), so that no engine difference —
// decimal scale, -0, time zones, boolean vs tinyint, JSON key order — shows
// as a difference and every real one does. When both sides are on one
// engine it first compares key-range chunks by count and MD5 in each
// database and reads only the chunks that differ. Memory stays bounded by
// one row of each side plus the samples kept; the fence column is never
// read.
//
// Compare (this file) runs chunks.go, the chunk checksums, where they can
// stand for the rows, and merge.go, the merge of two streams (stream.go,
// one side's ordered scan) whose rows row.go compares; canon.go holds the
// canonical values.
package verify

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/typemap"
)

// Side is one end of the comparison.
type Side struct {
	DB      *sql.DB
	SQL     dialect.Dialect
	Table   []string
	Columns []dialect.Column // the compared columns, in the same order on both sides
}

// Result is one table's comparison. Its JSON keys are the contract of SPEC §4.
type Result struct {
	Table      string   `json:"table"`
	SourceRows int64    `json:"source_rows"`
	TargetRows int64    `json:"target_rows"`
	Missing    int64    `json:"missing"`
	Extra      int64    `json:"extra"`
	Changed    int64    `json:"changed"`
	Samples    []Sample `json:"samples"`
	// Method is "checksum" when key-range chunks were hashed in each
	// database and only differing chunks compared row by row, "rows" when
	// every row was compared.
	Method   string `json:"method"`
	Chunks   int64  `json:"chunks,omitempty"`
	Narrowed int64  `json:"chunks_narrowed,omitempty"` // chunks whose checksums differed
}

// Equal reports whether the table was found identical.
func (r Result) Equal() bool { return r.Missing == 0 && r.Extra == 0 && r.Changed == 0 }

// Sample is one differing row, values in canonical form.
type Sample struct {
	Key     string         `json:"key"`
	Kind    string         `json:"kind"`   // missing, extra, changed
	Source  map[string]any `json:"source"` // canonical text, nil for NULL
	Target  map[string]any `json:"target"`
	Columns []string       `json:"columns,omitempty"` // the differing columns of a changed row
}

// Options tune a comparison.
type Options struct {
	Name       string   // the table's name in the result
	Key        []string // business key columns
	MaxSamples int      // differing rows kept per table; default 10
	Report     Reporter // told of progress and of every difference; may be nil
	// ChunkRows is the size of a checksum chunk, in source rows; default
	// 10000, negative to compare every row.
	ChunkRows int
}

// Reporter is told what a comparison finds as it goes.
type Reporter interface {
	// Compared is told the rows read from the source so far, from time to
	// time.
	Compared(rows int64)
	// Differs is told every difference: its kind (missing, extra,
	// changed) and the key as read (from the source for missing and
	// changed rows, from the target for extra ones). An error stops the
	// comparison.
	Differs(kind string, key []any) error
}

// Compare reports how the two sides differ. When both are on one engine,
// with the same column types and a key that orders by value, each key range
// of ChunkRows source rows is counted and hashed in its own database, both
// sides at once, and only the ranges whose count or 128-bit hash differ are
// read and compared row by row. Otherwise both tables are read in full. A
// difference is only ever reported from the row comparison, so the hash can
// make verification faster, never wrong in the way of a false positive.
func Compare(ctx context.Context, src, dst Side, o Options) (Result, error) {
	c := &comparison{src: src, dst: dst, o: o, res: Result{Table: o.Name, Samples: []Sample{}, Method: "rows"}}
	if c.o.MaxSamples == 0 {
		c.o.MaxSamples = 10
	}
	if c.o.ChunkRows == 0 {
		c.o.ChunkRows = 10000
	}
	if len(src.Columns) != len(dst.Columns) {
		return c.res, fmt.Errorf("verify %s: %d source columns, %d target columns", o.Name, len(src.Columns), len(dst.Columns))
	}
	c.names = make([]string, len(src.Columns))
	c.kinds = make([]typemap.Kind, len(src.Columns))
	for i := range src.Columns {
		c.names[i] = src.Columns[i].Name
		c.kinds[i] = typemap.Pair(src.Columns[i].Base, dst.Columns[i].Base)
	}
	c.form = typemap.SourceForm(src.SQL.Engine(), dst.SQL.Engine(), src.Columns, dst.Columns)
	c.keyIdx = make([]int, len(o.Key))
	c.textKey = make([]bool, len(o.Key))
	for i, k := range o.Key {
		c.keyIdx[i] = slices.Index(c.names, k)
		if c.keyIdx[i] < 0 {
			return c.res, fmt.Errorf("verify %s: key column %q is not compared", o.Name, k)
		}
		switch c.kinds[c.keyIdx[i]] {
		case typemap.Number, typemap.Float, typemap.Bool, typemap.Timestamp, typemap.Date, typemap.Time:
		default: // compared as text in Go: read in byte order of the text form
			c.textKey[i] = true
		}
	}
	var err error
	if c.checksummed() {
		c.res.Method = "checksum"
		err = c.chunks(ctx)
	} else {
		err = c.rows(ctx, nil, nil)
	}
	if err == nil {
		err = c.collected
	}
	if err != nil {
		return c.res, fmt.Errorf("verify %s: %w", o.Name, err)
	}
	return c.res, nil
}

// comparison is one table's comparison under way.
type comparison struct {
	src, dst  Side
	o         Options
	res       Result
	names     []string
	kinds     []typemap.Kind
	keyIdx    []int
	textKey   []bool
	collected error // the first error of o.Report.Differs
	// form puts a source value in the form the copy writes where the
	// kinds alone do not compare it (typemap.SourceForm); nil: as read.
	form []func(any) (any, error)
}

// checksummed reports whether chunk checksums can stand for the rows: one
// engine, the same types on both sides (equal values then have equal text),
// and a key ordered by value on both (a key range holds the same rows).
func (c *comparison) checksummed() bool {
	if c.o.ChunkRows < 0 || c.src.SQL.Engine() != c.dst.SQL.Engine() {
		return false
	}
	for i := range c.src.Columns {
		if !strings.EqualFold(c.src.Columns[i].Type, c.dst.Columns[i].Type) {
			return false
		}
	}
	for _, j := range c.keyIdx {
		if !c.src.SQL.OrderedByValue(c.src.Columns[j]) || !c.dst.SQL.OrderedByValue(c.dst.Columns[j]) {
			return false
		}
	}
	return true
}
