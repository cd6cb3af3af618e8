package keyset_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/keyset"
	"github.com/migrate-dev/migrate/plans"
)

// each runs fn against a fresh database of every engine holding "Orders":
// a composite key (region, id) with a mixed-case name, 3 regions × 10 ids.
func each(t *testing.T, fn func(t *testing.T, db *sql.DB, d dialect.Dialect)) {
	for _, e := range []struct {
		name string
		url  func(testing.TB) string
		ddl  string
	}{
		{"postgres", testsvc.NewPostgresDB, `CREATE TABLE "Orders" (region text, id bigint, "Note" text, PRIMARY KEY (region, id))`},
		{"mysql", testsvc.NewMySQLDB, "CREATE TABLE `Orders` (region varchar(10), id bigint, `Note` text, PRIMARY KEY (region, id))"},
	} {
		t.Run(e.name, func(t *testing.T) {
			dsn, err := plans.ParseDSN(e.url(t))
			if err != nil {
				t.Fatal(err)
			}
			d, _ := dialect.For(dsn.Engine())
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.Session{RawTimes: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if _, err := db.Exec(e.ddl); err != nil {
				t.Fatal(err)
			}
			var vals []string
			for _, r := range []string{"east", "north", "west"} {
				for i := 1; i <= 10; i++ {
					vals = append(vals, fmt.Sprintf("('%s', %d, 'note %s %d')", r, i, r, i))
				}
			}
			if _, err := db.Exec("INSERT INTO " + d.Quote("Orders") + " VALUES " + strings.Join(vals, ", ")); err != nil {
				t.Fatal(err)
			}
			fn(t, db, d)
		})
	}
}

func reader(db *sql.DB, d dialect.Dialect) *keyset.Reader {
	return &keyset.Reader{DB: db, SQL: d, Table: []string{"Orders"}, Columns: []string{"region", "id", "Note"}, Key: []string{"region", "id"}, Limit: 7}
}

// keys renders rows' keys as "region/id".
func keys(rows [][]any) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s/%s", text(r[0]), text(r[1])))
	}
	return out
}

func text(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// Pages walk the whole table in key order, each after the last one's key,
// and end with an empty page.
func TestReader_PagesInKeyOrder(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		rd := reader(db, d)
		idx, err := keyset.KeyIndexes(rd.Columns, rd.Key)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		var after []any
		for pages := 0; ; pages++ {
			rows, err := rd.Page(t.Context(), after)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) == 0 {
				if pages != 5 { // 30 rows in pages of 7
					t.Errorf("%d pages, want 5", pages)
				}
				break
			}
			all = append(all, keys(rows)...)
			after = keyset.KeyOf(rows[len(rows)-1], idx)
		}
		if len(all) != 30 || all[0] != "east/1" || all[9] != "east/10" || all[10] != "north/1" || all[29] != "west/10" {
			t.Errorf("keys in order: %v", all)
		}
	})
}

// Last reads the batch that ends at a key, in key order: the rows a
// takeover compares before it resumes.
func TestReader_Last(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		rows, err := reader(db, d).Last(t.Context(), []any{"north", 3})
		if err != nil {
			t.Fatal(err)
		}
		want := "east/6 east/7 east/8 east/9 east/10 north/1 north/2 north/3"
		if got := strings.Join(keys(rows), " "); got != want[len("east/6 "):] {
			t.Errorf("Last = %s, want %s", got, want[len("east/6 "):])
		}
	})
}

// ByKeys reads exactly the rows asked for; Convert sees every value, and a
// value it refuses names the row's key and the column.
func TestReader_ByKeysAndConvert(t *testing.T) {
	each(t, func(t *testing.T, db *sql.DB, d dialect.Dialect) {
		rd := reader(db, d)
		rd.Convert = func(col int, v any) (any, error) {
			if col == 2 {
				return strings.ToUpper(text(v)), nil
			}
			return v, nil
		}
		rows, err := rd.ByKeys(t.Context(), [][]any{{"west", 2}, {"east", 9}, {"south", 1}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rows {
			got[keys([][]any{r})[0]] = r[2].(string)
		}
		if len(got) != 2 || got["west/2"] != "NOTE WEST 2" || got["east/9"] != "NOTE EAST 9" {
			t.Errorf("ByKeys = %v", got)
		}
		bad := errors.New("cannot cross")
		rd.Convert = func(col int, v any) (any, error) {
			if col == 2 && text(v) == "note east 9" {
				return nil, bad
			}
			return v, nil
		}
		_, err = rd.ByKeys(t.Context(), [][]any{{"east", 9}})
		var ce *keyset.ConvertError
		if !errors.As(err, &ce) || !errors.Is(err, bad) || ce.Column != "Note" || fmt.Sprint(keys([][]any{ce.Key})) != "[east/9]" {
			t.Errorf("a refused value: %v", err)
		}
	})
}

// Prefetch keeps reading ahead of its consumer, ends with the end or an
// error (returned again after), and Close stops a producer that is waiting.
func TestPrefetch(t *testing.T) {
	n := 0
	a := keyset.Prefetch(t.Context(), 2, func(context.Context) (int, bool, error) {
		n++
		return n, n <= 3, nil
	})
	var got []int
	for {
		v, ok, err := a.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, v)
	}
	a.Close()
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("values %v, want [1 2 3]", got)
	}

	boom := errors.New("boom")
	a = keyset.Prefetch(t.Context(), 1, func(context.Context) (int, bool, error) { return 0, true, boom })
	for range 2 {
		if _, ok, err := a.Next(t.Context()); ok || err != boom {
			t.Errorf("after an error: ok %v err %v", ok, err)
		}
	}
	a.Close()

	stopped := make(chan struct{})
	a = keyset.Prefetch(t.Context(), 1, func(ctx context.Context) (int, bool, error) {
		<-ctx.Done() // a read that only Close ends
		close(stopped)
		return 0, false, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, ok, err := a.Next(ctx); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next past its context: ok %v err %v", ok, err)
	}
	a.Close()
	<-stopped
}
