package typemap

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

func TestConverter(t *testing.T) {
	if Converter(plans.Postgres, plans.Postgres, nil, nil) != nil {
		t.Error("PostgreSQL to PostgreSQL: want values as read (nil)")
	}
	col := func(base string) []Column { return []Column{{Name: "c", Type: base, Base: base}} }
	day := time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		from, to plans.Engine
		src, dst string
		in, want any
		err      string // part of the error text; "" for none
	}{
		{"NULL", plans.MySQL, plans.Postgres, "int", "integer", nil, nil, ""},
		{"text as a string", plans.MySQL, plans.Postgres, "varchar", "varchar", []byte("a"), "a", ""},
		{"binary stays bytes", plans.MySQL, plans.Postgres, "varbinary", "bytea", []byte{0, 1}, []byte{0, 1}, ""},
		{"bit stays bytes", plans.MySQL, plans.MySQL, "bit", "bit", []byte{1}, []byte{1}, ""},
		{"unsigned bigint as text", plans.MySQL, plans.Postgres, "bigint", "numeric", uint64(math.MaxUint64), "18446744073709551615", ""},
		{"tinyint(1) to boolean", plans.MySQL, plans.Postgres, "tinyint", "boolean", int64(1), true, ""},
		{"tinyint(1) holding 2", plans.MySQL, plans.Postgres, "tinyint", "boolean", int64(2), nil, "is not a boolean"},
		{"date to PostgreSQL", plans.MySQL, plans.Postgres, "date", "date", []byte("2024-02-29"), day, ""},
		{"date to MySQL as read", plans.MySQL, plans.MySQL, "date", "date", []byte("2024-02-29"), "2024-02-29", ""},
		{"zero date to MySQL", plans.MySQL, plans.MySQL, "datetime", "datetime", []byte("0000-00-00 00:00:00"), "0000-00-00 00:00:00", ""},
		{"zero date to PostgreSQL", plans.MySQL, plans.Postgres, "date", "date", []byte("2024-02-00"), nil, "zero year, month or day"},
		{"TIME past 24h", plans.MySQL, plans.Postgres, "time", "time", []byte("100:00:00"), "100:00:00", "outside PostgreSQL's time range"},
		{"TIME in range", plans.MySQL, plans.Postgres, "time", "time", []byte("23:59:59"), "23:59:59", ""},
		{"NaN double", plans.Postgres, plans.MySQL, "double precision", "double", math.NaN(), nil, "has no MySQL value"},
		{"infinite real", plans.Postgres, plans.MySQL, "real", "float", float32(math.Inf(1)), nil, "has no MySQL value"},
		{"numeric NaN", plans.Postgres, plans.MySQL, "numeric", "decimal", "NaN", nil, "numeric NaN has no MySQL value"},
		{"jsonb bytes as text", plans.Postgres, plans.MySQL, "jsonb", "json", []byte(`{}`), `{}`, ""},
		{"bytea stays bytes", plans.Postgres, plans.MySQL, "bytea", "longblob", []byte{0}, []byte{0}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Converter(c.from, c.to, col(c.src), col(c.dst))(0, c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				if c.want == nil {
					return
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
		})
	}
}
