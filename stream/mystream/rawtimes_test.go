package mystream

import (
	"reflect"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
)

// TestRawTimes: with RawTimes, dates and times arrive as the text the
// project's source pool (dialect.Session{RawTimes: true}) reads, zero and
// partly zero dates included, with each column's fractional digits.
func TestRawTimes(t *testing.T) {
	s := newSource(t)
	raw, err := dialect.MySQL{}.Open(s.dsn, dialect.Session{RawTimes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	s.exec(t, "CREATE TABLE times (id int PRIMARY KEY, d date, dt datetime, dt3 datetime(3), ts timestamp(6) NULL)")
	c := New(s.dsn, t.Name(), 0)
	c.RawTimes = true
	pos, err := c.Start(t.Context(), tablesOf(s.schema, "times"))
	if err != nil {
		t.Fatal(err)
	}
	s.exec(t, "INSERT INTO times VALUES (1, '2024-02-29', '2024-02-29 23:59:59', '2024-02-29 23:59:59.5', '2024-02-29 23:59:59.123456')",
		"INSERT INTO times VALUES (2, '0000-00-00', '0000-00-00 00:00:00', '2024-00-15 10:00:00.000', NULL)",
		"INSERT INTO times VALUES (3, '1000-01-01', '9999-12-31 23:59:59', '1970-01-01 00:00:00.001', '2038-01-19 03:14:07.999999')")
	r := open(t, c, pos)
	tx := nextTx(t, r)
	src := source{dsn: s.dsn, schema: s.schema, pool: raw}
	for i, ch := range tx.Changes {
		want := src.row(t, "times", []string{"id"}, i+1)
		if !reflect.DeepEqual(ch.New, want) {
			t.Errorf("row %d: change %q, pool %q", i+1, ch.New, want)
		}
	}
}
