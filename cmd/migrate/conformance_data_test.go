package main_test

// The engine-neutral machinery of the conformance suite (its engines and
// plans are the end-to-end harness's, e2e_env_test.go): seed tables of Go
// values created with each engine's own column types and inserted with
// bind parameters, and a canonical dump of a table that compares
// PostgreSQL and MySQL rows value by value.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// kind says how a column's values are normalised in the canonical dump.
type kind int

const (
	kText    kind = iota // verbatim, quoted
	kChar                // char(n): trailing spaces dropped (PostgreSQL pads, MySQL strips)
	kClock               // time of day, HH:MM:SS.ffffff
	kNum                 // exact decimal text (integers and fixed-point decimals, scale kept)
	kNumNorm             // decimal text without trailing fractional zeros (a changed scale)
	kFloat               // shortest float64 text, NaN and ±Inf spelled out
	kFloat32             // shortest float32 text
	kBool                // true/false from booleans or 0/1
	kDate                // YYYY-MM-DD
	kTime                // UTC with microseconds
	kUUID                // lower case
	kJSON                // parsed and re-marshalled: sorted keys, no spaces
	kBytes               // hex, or length and sha256 when long
)

// col is one column of a seed table: its logical type is looked up in the
// engine's types; "=ddl" is DDL as it is.
type col struct {
	name, typ string
	kind      kind
}

func (c col) ddl(eng *engine) string {
	if ddl, ok := strings.CutPrefix(c.typ, "="); ok {
		return ddl
	}
	if t, ok := eng.types[c.typ]; ok {
		return t
	}
	panic("no " + eng.name + " type for " + c.typ)
}

// table is a seed table: columns, key and rows of Go values.
type table struct {
	name string
	cols []col
	key  []string
	rows [][]any
}

func (tb *table) colNames() []string {
	names := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		names[i] = c.name
	}
	return names
}

// create makes tb in db with engine eng's types, and inserts its rows with
// bind parameters, many rows a statement.
func (tb *table) create(t *testing.T, eng *engine, db *sql.DB) {
	t.Helper()
	defs := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		defs[i] = eng.quote(c.name) + " " + c.ddl(eng)
		if slices.Contains(tb.key, c.name) {
			defs[i] += " NOT NULL"
		}
	}
	keys := make([]string, len(tb.key))
	for i, k := range tb.key {
		keys[i] = eng.quote(k)
	}
	ddl := fmt.Sprintf("CREATE TABLE %s (%s, PRIMARY KEY (%s))", eng.quote(tb.name), strings.Join(defs, ", "), strings.Join(keys, ", "))
	exec1(t, db, ddl)
	insertRows(t, eng, db, tb.name, tb.colNames(), tb.rows)
}

// execer is a *sql.DB, *sql.Conn or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertRows inserts rows with bind parameters, several rows a statement.
func insertRows(t *testing.T, eng *engine, db execer, name string, cols []string, rows [][]any) {
	t.Helper()
	qc := make([]string, len(cols))
	for i, c := range cols {
		qc[i] = eng.quote(c)
	}
	per := max(1, min(500, 30000/len(cols)))
	for len(rows) > 0 {
		chunk := rows[:min(per, len(rows))]
		rows = rows[len(chunk):]
		tuples := make([]string, len(chunk))
		args := make([]any, 0, len(chunk)*len(cols))
		for r, row := range chunk {
			ph := make([]string, len(row))
			for i, v := range row {
				args = append(args, v)
				ph[i] = eng.ph(len(args))
			}
			tuples[r] = "(" + strings.Join(ph, ", ") + ")"
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", eng.quote(name), strings.Join(qc, ", "), strings.Join(tuples, ", "))
		if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("insert into %s: %v", name, err)
		}
	}
}

// dumpRow is one row of a canonical dump.
type dumpRow struct {
	key  string
	vals []string
}

// dump reads cols of table name from db and returns its rows in canonical
// form, sorted by the canonical key (collation-independent). MySQL is read
// through a prepared statement (binary protocol: exact doubles).
func dump(t *testing.T, eng *engine, db *sql.DB, name string, cols []col, key []string) []dumpRow {
	t.Helper()
	qc := make([]string, len(cols))
	var keyIdx []int
	for i, c := range cols {
		qc[i] = eng.quote(c.name)
		if slices.Contains(key, c.name) {
			keyIdx = append(keyIdx, i)
		}
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE 1 = %s", strings.Join(qc, ", "), eng.table(name), eng.ph(1))
	rows, err := db.QueryContext(t.Context(), q, 1)
	if err != nil {
		t.Fatalf("dump %s: %v", name, err)
	}
	defer rows.Close()
	var out []dumpRow
	for rows.Next() {
		holders := make([]any, len(cols))
		for i, c := range cols {
			holders[i] = holderFor(c.kind)
		}
		if err := rows.Scan(holders...); err != nil {
			t.Fatalf("dump %s: %v", name, err)
		}
		r := dumpRow{vals: make([]string, len(cols))}
		for i, c := range cols {
			r.vals[i] = canonical(t, c.kind, holders[i])
		}
		parts := make([]string, len(keyIdx))
		for i, k := range keyIdx {
			parts[i] = r.vals[k]
		}
		r.key = strings.Join(parts, "|")
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("dump %s: %v", name, err)
	}
	slices.SortFunc(out, func(a, b dumpRow) int { return cmp.Compare(a.key, b.key) })
	return out
}

func holderFor(k kind) any {
	switch k {
	case kFloat:
		return new(sql.NullFloat64)
	case kFloat32:
		// Not through a float64: database/sql converts go-sql-driver's
		// float32 by its shortest float32 text, which a float64 holds
		// as a value that need not round back to the same float32.
		return new(sql.Null[float32])
	case kBool:
		return new(sql.NullBool)
	case kDate, kTime:
		return new(sql.NullTime)
	case kBytes:
		return new(sql.Null[[]byte])
	default:
		return new(sql.NullString)
	}
}

func canonical(t *testing.T, k kind, h any) string {
	const null = "NULL"
	switch v := h.(type) {
	case *sql.NullFloat64:
		if !v.Valid {
			return null
		}
		return strconv.FormatFloat(v.Float64, 'g', -1, 64) // NaN, +Inf, -Inf spelled out
	case *sql.Null[float32]:
		if !v.Valid {
			return null
		}
		return strconv.FormatFloat(float64(v.V), 'g', -1, 32)
	case *sql.NullBool:
		if !v.Valid {
			return null
		}
		return strconv.FormatBool(v.Bool)
	case *sql.NullTime:
		if !v.Valid {
			return null
		}
		if v.Time.IsZero() { // go-sql-driver's reading of a MySQL zero date
			return "zero-date"
		}
		if k == kDate {
			return v.Time.Format(time.DateOnly)
		}
		return v.Time.UTC().Format("2006-01-02 15:04:05.000000")
	case *sql.Null[[]byte]:
		if !v.Valid {
			return null
		}
		if len(v.V) <= 32 {
			return "x'" + hex.EncodeToString(v.V) + "'"
		}
		sum := sha256.Sum256(v.V)
		return fmt.Sprintf("%d bytes, sha256 %x", len(v.V), sum[:8])
	case *sql.NullString:
		if !v.Valid {
			return null
		}
		switch k {
		case kNumNorm:
			s := v.String
			if strings.Contains(s, ".") {
				s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			}
			return s
		case kUUID:
			return strings.ToLower(v.String)
		case kJSON:
			dec := json.NewDecoder(strings.NewReader(v.String))
			dec.UseNumber()
			var x any
			if err := dec.Decode(&x); err != nil {
				return "invalid JSON " + strconv.Quote(v.String)
			}
			b, err := json.Marshal(x) // map keys sorted
			if err != nil {
				t.Fatal(err)
			}
			return "json " + string(b)
		case kText:
			return strconv.Quote(v.String)
		case kChar:
			return strconv.Quote(strings.TrimRight(v.String, " "))
		case kClock:
			hms, frac, _ := strings.Cut(v.String, ".")
			return hms + "." + (frac + "000000")[:6]
		}
		return v.String
	}
	t.Fatalf("canonical: unexpected holder %T", h)
	return ""
}

// assertSameDump compares the canonical dumps of the source and target
// tables tb and reports the first differing row.
func assertSameDump(t *testing.T, e *env, tb *table, want int) {
	t.Helper()
	compareDumps(t, e, tb.name, tb.name, tb.cols, tb.key, want)
}

// compareDumps compares the canonical dumps of cols of the source table
// srcName and the target table dstName, and reports the first differing row.
func compareDumps(t *testing.T, e *env, srcName, dstName string, cols []col, key []string, want int) {
	t.Helper()
	src := dump(t, e.src, e.srcDB, srcName, cols, key)
	dst := dump(t, e.dst, e.dstDB, dstName, cols, key)
	name := srcName
	if dstName != srcName {
		name = srcName + " -> " + dstName
	}
	if len(src) != want {
		t.Fatalf("%s: source holds %d rows, want %d", name, len(src), want)
	}
	for i := range max(len(src), len(dst)) {
		switch {
		case i >= len(dst):
			t.Fatalf("%s (%s→%s): target has %d rows, source %d; first missing: key %s", name, e.src.name, e.dst.name, len(dst), len(src), src[i].key)
		case i >= len(src):
			t.Fatalf("%s (%s→%s): target has %d rows, source %d; first extra: key %s", name, e.src.name, e.dst.name, len(dst), len(src), dst[i].key)
		case src[i].key != dst[i].key:
			t.Fatalf("%s (%s→%s): row %d: source key %s, target key %s", name, e.src.name, e.dst.name, i, src[i].key, dst[i].key)
		}
		for j, c := range cols {
			if src[i].vals[j] != dst[i].vals[j] {
				where := firstDiff(src[i].vals[j], dst[i].vals[j])
				for k := range src[i].vals {
					src[i].vals[k], dst[i].vals[k] = short(src[i].vals[k]), short(dst[i].vals[k])
				}
				t.Fatalf("%s (%s→%s): first differing row, key %s: column %s: source %s, target %s%s\n source row %v\n target row %v",
					name, e.src.name, e.dst.name, src[i].key, c.name, src[i].vals[j], dst[i].vals[j],
					where, src[i].vals, dst[i].vals)
			}
		}
	}
}

// short abbreviates a long canonical value at a rune boundary.
func short(s string) string {
	if len(s) <= 120 {
		return s
	}
	cut := 120
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…(%d bytes)", len(s))
}

// firstDiff says where two long values start to differ.
func firstDiff(a, b string) string {
	if len(a) <= 120 && len(b) <= 120 {
		return ""
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf(" (they differ from byte %d: source …%s, target …%s)", i, short(a[i:]), short(b[i:]))
}

// mapped is one source column of the type-mapping case: its DDL, how its
// values compare, the column type the target shows when it is PostgreSQL
// and when it is MySQL (for the source's own engine: as the source shows
// it; "" when not applicable, "a|b" for either), and a value.
type mapped struct {
	ddl    string
	kind   kind
	pg, my string
	val    any
}

var (
	mapTime = time.Date(2024, 5, 6, 7, 8, 9, 120_000_000, time.UTC)
	mapDay  = time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
)

// pgMapped is the PostgreSQL→MySQL mapping.
var pgMapped = []mapped{
	{"smallint", kNum, "smallint", "smallint", int16(math.MinInt16)},
	{"integer", kNum, "integer", "int", int32(math.MaxInt32)},
	{"bigint", kNum, "bigint", "bigint", int64(math.MinInt64)},
	{"numeric(10,2)", kNum, "numeric(10,2)", "decimal(10,2)", "-12345678.90"},
	{"real", kFloat32, "real", "float", float32(0.1)},
	{"double precision", kFloat, "double precision", "double", 1e308},
	{"varchar(10)", kText, "character varying(10)", "varchar(10)", "ä😀b  "},
	{"char(5)", kChar, "character(5)", "char(5)", "ab"},
	{"text", kText, "text", "longtext", "t\x01"},
	{"boolean", kBool, "boolean", "tinyint(1)", true},
	{"date", kDate, "date", "date", mapDay},
	{"time(3)", kClock, "time(3) without time zone", "time(3)", "23:59:59.123"},
	{"time", kClock, "time without time zone", "time(6)", "01:02:03.456789"},
	{"timestamp(2)", kTime, "timestamp(2) without time zone", "datetime(2)", mapTime},
	{"timestamptz(0)", kTime, "timestamp(0) with time zone", "datetime|datetime(0)", mapTime.Truncate(time.Second)},
	{"uuid", kUUID, "uuid", "char(36)", "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"},
	{"json", kJSON, "json", "json|longtext", `{"b": 1, "a": [true, null]}`},
	{"jsonb", kJSON, "jsonb", "json|longtext", `{"k": "ü"}`},
	{"bytea", kBytes, "bytea", "longblob", []byte{0, 1, 2, 255}},
	{"conf_mood", kText, "", "enum('sad','happy')", "happy"}, // an enum (CREATE TYPE): a MySQL ENUM of its labels
}

// myMapped is the MySQL→PostgreSQL mapping.
var myMapped = []mapped{
	{"tinyint(1)", kBool, "boolean", "tinyint(1)", true},
	{"tinyint", kNum, "smallint", "tinyint", int64(math.MinInt8)},
	{"smallint", kNum, "smallint", "smallint", int64(math.MinInt16)},
	{"smallint unsigned", kNum, "integer", "smallint unsigned", int64(math.MaxUint16)},
	{"mediumint", kNum, "integer", "mediumint", int64(-8388608)},
	{"int", kNum, "integer", "int", int64(math.MinInt32)},
	{"int unsigned", kNum, "bigint", "int unsigned", int64(math.MaxUint32)},
	{"bigint", kNum, "bigint", "bigint", int64(math.MaxInt64)},
	{"bigint unsigned", kNum, "numeric(20,0)", "bigint unsigned", "18446744073709551615"},
	{"decimal(10,2)", kNum, "numeric(10,2)", "decimal(10,2)", "-12345678.90"},
	{"float", kFloat32, "real", "float", float32(0.1)},
	{"double", kFloat, "double precision", "double", 1e308},
	{"char(5)", kChar, "character(5)", "char(5)", "ab"},
	{"varchar(10)", kText, "character varying(10)", "varchar(10)", "ä😀b  "},
	{"tinytext", kText, "text", "tinytext", "tiny"},
	{"text", kText, "text", "text", "text"},
	{"mediumtext", kText, "text", "mediumtext", "medium 😀"},
	{"longtext", kText, "text", "longtext", "long"},
	{"binary(4)", kBytes, "bytea", "binary(4)", []byte{1, 2}},
	{"varbinary(8)", kBytes, "bytea", "varbinary(8)", []byte{0, 255}},
	{"tinyblob", kBytes, "bytea", "tinyblob", []byte{3}},
	{"blob", kBytes, "bytea", "blob", []byte{4, 0}},
	{"mediumblob", kBytes, "bytea", "mediumblob", []byte{}},
	{"longblob", kBytes, "bytea", "longblob", []byte("long")},
	{"date", kDate, "date", "date", mapDay},
	{"time(3)", kClock, "time(3) without time zone", "time(3)", "23:59:59.123"},
	{"datetime(2)", kTime, "timestamp(2) without time zone", "datetime(2)", mapTime},
	{"timestamp NULL DEFAULT NULL", kTime, "timestamp(0) with time zone", "timestamp", mapTime.Truncate(time.Second)},
	{"json", kJSON, "jsonb", "json|longtext", `{"b": 1, "a": [true, null]}`},
	{"enum('small','large')", kText, "text", "enum('small','large')", "large"},
	{"set('x','y','z')", kText, "text", "set('x','y','z')", "x,z"},
	{"year", kNum, "smallint", "year", int64(2155)},
}
