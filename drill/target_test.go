package drill

import (
	"reflect"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
)

func TestRedirect(t *testing.T) {
	for _, tc := range []struct{ in, up, want string }{
		{"postgres://u:p%40ss@db.example:5433/app?sslmode=disable", "db.example:5433", "postgres://u:p%40ss@127.0.0.1:9999/app?sslmode=disable"},
		{"postgresql://u@db/app", "db:5432", "postgresql://u@127.0.0.1:9999/app"},
		{"mysql://u:pw@10.0.0.1/app", "10.0.0.1:3306", "mysql://u:pw@127.0.0.1:9999/app"},
		{"u:pw@tcp(10.0.0.1:3307)/app?parseTime=true", "10.0.0.1:3307", "u:pw@tcp(127.0.0.1:9999)/app?parseTime=true"},
		{"redis://:sec@cache:6380/2", "cache:6380", "redis://:sec@127.0.0.1:9999/2"},
		{"redis://[::1]/0", "[::1]:6379", "redis://127.0.0.1:9999/0"},
	} {
		d, err := plans.ParseDSN(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if up, err := hostPort(d); err != nil || up != tc.up {
			t.Errorf("hostPort(%s) = %q, %v; want %q", d, up, err, tc.up)
		}
		got, err := redirect(d, "127.0.0.1:9999")
		if err != nil || got.Secret() != tc.want || got.Password() != d.Password() || got.Engine() != d.Engine() {
			t.Errorf("redirect(%s) = %s, %v; want %s with the same password", d, got, err, tc.want)
		}
	}
	for _, in := range []string{"u:secret@unix(/run/mysqld.sock)/app", "postgres://u:secret@/app?host=/run/pg"} {
		d, err := plans.ParseDSN(in)
		if err != nil {
			t.Fatal(err)
		}
		_, err1 := hostPort(d)
		_, err2 := redirect(d, "127.0.0.1:9999")
		if err1 == nil && err2 == nil {
			t.Errorf("%s: a socket DSN was accepted", d)
		}
		for _, err := range []error{err1, err2} {
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows the password: %v", err)
			}
		}
	}
}

// The drill's SQL, pinned per engine.
func TestDrillSQL(t *testing.T) {
	r := dialect.Range{Lo: "10", Hi: "20"}
	for _, tc := range []struct {
		name  string
		d     dialect.Dialect
		after bool
		r     dialect.Range
		sql   string
		args  []int
	}{
		{"postgres all", dialect.Postgres{}, false, dialect.Range{},
			`SELECT count(*), count(*) FILTER (WHERE "_fence" < $1) FROM "public"."t"`, []int{4}},
		{"postgres after in range", dialect.Postgres{}, true, r,
			`SELECT count(*), count(*) FILTER (WHERE "_fence" < $1) FROM "public"."t" WHERE ("a", "b") > ($2, $3) AND "a" > $4 AND "a" <= $5`, []int{4, 0, 1, 2, 3}},
		{"mysql all", dialect.MySQL{}, false, dialect.Range{},
			"SELECT COUNT(*), COALESCE(SUM(`_fence` < ?), 0) FROM `public`.`t`", []int{4}},
		{"mysql after in range", dialect.MySQL{}, true, dialect.Range{Hi: "20"},
			"SELECT COUNT(*), COALESCE(SUM(`_fence` < ?), 0) FROM `public`.`t` WHERE (`a`, `b`) > (?, ?) AND `a` <= ?", []int{4, 0, 1, 3}},
	} {
		q := tc.d.DrillCount([]string{"public", "t"}, []string{"a", "b"}, "_fence", tc.after, tc.r)
		if q.SQL != tc.sql || !reflect.DeepEqual(q.Args, tc.args) {
			t.Errorf("%s:\n got %s %v\nwant %s %v", tc.name, q.SQL, q.Args, tc.sql, tc.args)
		}
	}
	if got := (dialect.Postgres{}).DropTable([]string{"s", "t"}); got != `DROP TABLE IF EXISTS "s"."t"` {
		t.Errorf("postgres drop: %s", got)
	}
	if got := (dialect.MySQL{}).DropTable([]string{"t"}); got != "DROP TABLE IF EXISTS `t`" {
		t.Errorf("mysql drop: %s", got)
	}
}
