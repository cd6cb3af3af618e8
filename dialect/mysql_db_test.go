package dialect_test

import (
	"context"
	"database/sql"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

func openMySQL(t *testing.T) (*sql.DB, dialect.Dialect) {
	t.Helper()
	dsn, err := plans.ParseDSN(testsvc.NewMySQLDB(t))
	if err != nil {
		t.Fatal(err)
	}
	db, d, err := dialect.Open(t.Context(), dialect.MySQL{}, dsn, dialect.Session{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, d
}

// F2 on MySQL: the upsert overwrites a row only when the stored token is <=
// the incoming one, and the probe tells inserted, replayed and newer rows.
func TestMySQL_UpsertFenced(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id bigint PRIMARY KEY, v varchar(20), _fence bigint NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	upsert := func(tok int64, rows ...[]any) (exist, newer int64) {
		t.Helper()
		st := d.Upsert([]string{"t"}, []string{"id", "v"}, []string{"id"}, "_fence", len(rows))
		probe := []any{tok}
		var args []any
		for _, r := range rows {
			probe = append(probe, r[0])
			args = append(args, r[0], r[1], tok)
		}
		if err := db.QueryRowContext(ctx, st.Probe, probe...).Scan(&exist, &newer); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, st.SQL, args...); err != nil {
			t.Fatal(err)
		}
		return exist, newer
	}
	value := func(id int64) (v string, tok int64) {
		t.Helper()
		if err := db.QueryRowContext(ctx, "SELECT v, _fence FROM t WHERE id = ?", id).Scan(&v, &tok); err != nil {
			t.Fatal(err)
		}
		return v, tok
	}
	if exist, newer := upsert(5, []any{1, "five"}, []any{2, "five"}); exist != 0 || newer != 0 {
		t.Fatalf("first write: probe %d %d, want 0 0", exist, newer)
	}
	t.Run("lower token never overwrites", func(t *testing.T) {
		if exist, newer := upsert(4, []any{1, "four"}); exist != 1 || newer != 1 {
			t.Errorf("probe %d %d, want 1 existing, 1 newer", exist, newer)
		}
		if v, tok := value(1); v != "five" || tok != 5 {
			t.Errorf("row 1 = %q token %d, want five 5", v, tok)
		}
	})
	t.Run("higher token overwrites every column, fence last", func(t *testing.T) {
		if exist, newer := upsert(6, []any{2, "six"}, []any{3, "six"}); exist != 1 || newer != 0 {
			t.Errorf("probe %d %d, want 1 existing, 0 newer", exist, newer)
		}
		if v, tok := value(2); v != "six" || tok != 6 {
			t.Errorf("row 2 = %q token %d, want six 6", v, tok)
		}
	})
}

// BoundTx on MySQL: the server closes the connection of a transaction whose
// client went silent (wait_timeout), releasing its locks.
func TestMySQL_BoundTx(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "CREATE TABLE w (id int PRIMARY KEY, v int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO w VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	frozen, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Rollback() }()
	q, args := d.BoundTx(time.Second)
	if _, err := frozen.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
	if _, err := frozen.Exec("UPDATE w SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := db.ExecContext(ctx, "UPDATE w SET v = 2 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 2500*time.Millisecond {
		t.Errorf("the second writer waited %v; the server should have dropped the silent session after 1s", waited)
	}
	if err := frozen.Commit(); err == nil {
		t.Error("the silent transaction committed after its bound")
	}
}

// MySQL reads FLOAT exactly in every statement that reads rows for a copy
// — the first page (no bind parameters: the text protocol, which sends a
// FLOAT with six significant digits), later pages, the batch before a
// resume point, rows by key — also with interpolateParams=true, which
// sends every statement by the text protocol.
func TestMySQL_ReadsFloatExactly(t *testing.T) {
	vals := []float32{1.2345678, 16777216, 3.14159265, -0.000123456789, 3.4028235e38, 1.4e-45}
	base := testsvc.NewMySQLDB(t)
	for _, c := range []struct{ name, query string }{{"prepared", ""}, {"interpolateParams", "?interpolateParams=true"}} {
		t.Run(c.name, func(t *testing.T) {
			p, err := plans.ParseDSN(base + c.query)
			if err != nil {
				t.Fatal(err)
			}
			db, d, err := dialect.Open(t.Context(), dialect.MySQL{}, p, dialect.Session{RawTimes: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			ctx := t.Context()
			if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS f (id bigint PRIMARY KEY, x float, d double, s varchar(10))"); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if _, err := db.ExecContext(ctx, "REPLACE INTO f VALUES (?, ?, ?, ?)", i+1, v, float64(v), "s"); err != nil {
					t.Fatal(err)
				}
			}
			table, cols, key := []string{"f"}, []string{"id", "x", "d", "s"}, []string{"id"}
			d = dialect.WithColumns(d, table, []dialect.Column{
				{Name: "id", Type: "bigint", Base: "bigint"}, {Name: "x", Type: "float", Base: "float"},
				{Name: "d", Type: "double", Base: "double"}, {Name: "s", Type: "varchar(10)", Base: "varchar"}})
			read := func(name, q string, args ...any) {
				t.Helper()
				rows, err := db.QueryContext(ctx, q, args...)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				defer rows.Close()
				n := 0
				for ; rows.Next(); n++ {
					var id int64
					var x, dbl any
					var s string
					if err := rows.Scan(&id, &x, &dbl, &s); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if want := float64(vals[id-1]); asFloat64(x) != want || dbl != want || s != "s" {
						t.Errorf("%s: row %d: FLOAT read as %T %v, DOUBLE as %T %v, varchar as %q; want %v and \"s\"", name, id, x, x, dbl, dbl, s, want)
					}
				}
				if err := rows.Err(); err != nil || n == 0 {
					t.Fatalf("%s: %d rows, %v", name, n, err)
				}
			}
			first := d.SelectPage(table, cols, key, false, dialect.Range{}, 3)
			read("first page", first.SQL, first.Bind([]any{nil, nil, nil})...)
			next := d.SelectPage(table, cols, key, true, dialect.Range{}, 10)
			read("later page", next.SQL, next.Bind([]any{int64(3), nil, nil})...)
			last := d.SelectLast(table, cols, key, dialect.Range{}, 10)
			read("last batch", last.SQL, last.Bind([]any{int64(len(vals)), nil, nil})...)
			read("by keys", d.SelectByKeys(table, cols, key, 2), int64(1), int64(5))
		})
	}
}

// asFloat64 is a float read by go-sql-driver (float32 for a FLOAT, float64
// for a DOUBLE) as a float64; NaN for anything else.
func asFloat64(v any) float64 {
	switch x := v.(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	}
	return math.NaN()
}

// MySQL's catalog gives ENUM and SET types with their members as the
// source spells them (a MySQL target creates them from it).
func TestMySQL_ColumnsKeepCase(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	ddl := "CREATE TABLE film (id int PRIMARY KEY, rating ENUM('G','PG','PG-13','R','NC-17'), " +
		"grade enum('a','A') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, tags SET('Red','red','BLUE') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)"
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	q, args := d.Columns([]string{"film"})
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var c dialect.Column
		if err := rows.Scan(&c.Name, &c.Type, &c.Base, &c.NotNull); err != nil {
			t.Fatal(err)
		}
		if c.Base == "enum" || c.Base == "set" {
			got = append(got, c.Name+" "+c.Type+" "+c.Base)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"rating enum('G','PG','PG-13','R','NC-17') enum", "grade enum('a','A') enum", "tags set('Red','red','BLUE') set"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("columns\n got %s\nwant %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
}

// TestMySQL_ByKeysUseTheKey: a delete or a select of 1, 2 or 64 keys of
// a composite key reads the key's index, not the whole table (MariaDB
// scans the whole table for a DELETE whose row IN holds one tuple).
func TestMySQL_ByKeysUseTheKey(t *testing.T) {
	db, d := openMySQL(t)
	ctx := t.Context()
	for _, q := range []string{
		"CREATE TABLE ol (order_id bigint NOT NULL, line int NOT NULL, qty int, PRIMARY KEY (order_id, line))",
		"INSERT INTO ol SELECT seq DIV 10, seq MOD 10, 1 FROM seq_1_to_20000",
		"ANALYZE TABLE ol",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	key := []string{"order_id", "line"}
	for _, n := range []int{1, 2, 64} {
		args := make([]any, 0, 2*n)
		for i := range n {
			args = append(args, int64(100+i), int64(i%10))
		}
		for _, q := range []string{d.DeleteByKeys([]string{"ol"}, key, n), d.SelectByKeys([]string{"ol"}, []string{"order_id", "line", "qty"}, key, n)} {
			rows, err := db.QueryContext(ctx, "EXPLAIN "+q, args...)
			if err != nil {
				t.Fatalf("EXPLAIN %s: %v", q, err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]sql.NullString, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for i, c := range cols {
					if c == "type" && (vals[i].String == "ALL" || vals[i].String == "index") {
						t.Errorf("%d keys: %s reads the whole table (EXPLAIN type %s)", n, q, vals[i].String)
					}
				}
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
