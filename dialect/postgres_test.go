package dialect

import (
	"testing"
)

func TestPostgres_SelectPage(t *testing.T) {
	p := Postgres{}
	tbl := []string{"public", "or\"ders"}
	cases := []struct {
		name  string
		key   []string
		after bool
		r     Range
		want  string
	}{
		{"first page", []string{"id"}, false, Range{}, `SELECT "id", "v" FROM "public"."or""ders" ORDER BY "id" LIMIT 1000`},
		{"after", []string{"id"}, true, Range{}, `SELECT "id", "v" FROM "public"."or""ders" WHERE ("id") > ($1) ORDER BY "id" LIMIT 1000`},
		{"composite in range", []string{"id", "v"}, true, Range{Lo: 1, Hi: 9},
			`SELECT "id", "v" FROM "public"."or""ders" WHERE ("id", "v") > ($1, $2) AND "id" > $3 AND "id" <= $4 ORDER BY "id", "v" LIMIT 1000`},
		{"upper only", []string{"id"}, false, Range{Hi: 9}, `SELECT "id", "v" FROM "public"."or""ders" WHERE "id" <= $1 ORDER BY "id" LIMIT 1000`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := p.SelectPage(tbl, []string{"id", "v"}, c.key, c.after, c.r, 1000); got.SQL != c.want {
				t.Errorf("got  %s\nwant %s", got.SQL, c.want)
			}
		})
	}
}

func TestPostgres_Upsert(t *testing.T) {
	got := Postgres{}.Upsert([]string{"t"}, []string{"id", "a"}, []string{"id"}, "_fence", 2)
	want := `WITH w AS (INSERT INTO "t" AS t ("id", "a", "_fence") OVERRIDING SYSTEM VALUE VALUES ($1, $2, $5), ($3, $4, $5)` +
		` ON CONFLICT ("id") DO UPDATE SET "a" = EXCLUDED."a", "_fence" = EXCLUDED."_fence"` +
		` WHERE t."_fence" <= EXCLUDED."_fence"` +
		` RETURNING (xmax = 0) AS ins) SELECT count(*) FILTER (WHERE ins), count(*) FILTER (WHERE NOT ins) FROM w`
	if got.SQL != want || !got.Returns {
		t.Errorf("got  %s\nwant %s", got.SQL, want)
	}
}

func TestPostgres_CreateTable(t *testing.T) {
	got := Postgres{}.CreateTable([]string{"s", "t"}, []Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "Amount", Type: "numeric(12,2)"}}, []string{"id"}, "_fence")
	want := "CREATE TABLE \"s\".\"t\" (\n  \"id\" bigint NOT NULL,\n  \"Amount\" numeric(12,2),\n  \"_fence\" bigint NOT NULL DEFAULT 0,\n  PRIMARY KEY (\"id\")\n)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestSessionFor(t *testing.T) {
	s := SessionFor(30e9)
	if s.IdleInTransaction != 10e9 || s.Statement != 15e9 || s.Lock != 15e9 {
		t.Errorf("SessionFor(30s) = %+v", s)
	}
}
