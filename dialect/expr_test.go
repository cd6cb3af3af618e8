package dialect

import (
	"errors"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

func TestTranslateExpr(t *testing.T) {
	pg, my := plans.Postgres, plans.MySQL
	for _, c := range []struct {
		expr     string
		from, to plans.Engine
		want     string // "" with err: no translation, err in the message
		err      string
	}{
		{"(qty > 0)", pg, my, "(`qty` > 0)", ""},
		{`("Full Name" IS NOT NULL)`, pg, my, "(`Full Name` IS NOT NULL)", ""},
		{"'abc'::character varying", pg, my, "'abc'", ""},
		{"'2024-01-01 00:00:00'::timestamp without time zone", pg, my, "'2024-01-01 00:00:00'", ""},
		{"(score >= (0)::numeric)", pg, my, "(`score` >= (0))", ""},
		{"'a\\b'::text", pg, my, `'a\\b'`, ""},
		{"E'it''s\\n'", pg, my, `'it''s` + "\n" + `'`, ""},
		{"now()", pg, my, "now()", ""},
		{"CURRENT_TIMESTAMP", pg, my, "CURRENT_TIMESTAMP", ""},
		{"lower(email)", pg, my, "lower(`email`)", ""},
		{"length(name)", pg, my, "char_length(`name`)", ""},
		{"((first || ' '::text) || last)", pg, my, "concat(`first`, ' ', `last`)", ""},
		{"(status = ANY (ARRAY['a'::text, 'b'::text]))", pg, my, "(`status` IN ('a', 'b'))", ""},
		{"((a || b) = 'x'::text)", pg, my, "", "||"},
		{"(((\"OrderStatus\")::text = ANY ((ARRAY['open'::character varying, 'paid'::character varying])::text[])))", pg, my, "(((`OrderStatus`) IN ('open', 'paid')))", ""},
		{"((email)::text ~~ '%_@_%'::text)", pg, my, "((`email`) LIKE '%_@_%')", ""},
		{"(name !~~ 'a%'::text)", pg, my, "(`name` NOT LIKE 'a%')", ""},
		{"(name ~~* 'a%'::text)", pg, my, "", "~~*"},
		{"(a / 2)", pg, my, "", "division"},
		{"date_trunc('day'::text, at)", pg, my, "", "date_trunc"},
		{"(CURRENT_DATE + '7 days'::interval)", pg, my, "", "interval"},
		{"(mood = 'ok'::mood)", pg, my, "", "mood"},
		{"(x > ALL (ARRAY[1]))", pg, my, "", "ALL"},

		{"B'0101'::\"bit\"", pg, my, "", "the literal B '0101'"},

		{"`qty` > 0", my, pg, `"qty" > 0`, ""},
		{"b'0'", my, pg, "", "the literal b '0'"},
		{"x'ff' = `c`", my, pg, "", "the literal x 'ff'"},
		{"`a` * 2", my, pg, `"a" * 2`, ""},
		{"current_timestamp()", my, pg, "CURRENT_TIMESTAMP", ""},
		{"curdate()", my, pg, "CURRENT_DATE", ""},
		{"_utf8mb4'x' = `c`", my, pg, `'x' = "c"`, ""},
		{`'it\'s \\ here'`, my, pg, `E'it''s \\ here'`, ""},
		{"concat(`a`,'-',`b`)", my, pg, `concat("a",'-',"b")`, ""},
		{"length(`a`) < 10", my, pg, `octet_length("a") < 10`, ""},
		{"`st` in ('a','b') and `n` between 1 and 5", my, pg, `"st" IN ('a','b') AND "n" BETWEEN 1 AND 5`, ""},
		{"json_valid(`doc`)", my, pg, "", "json_valid"},
		{"`a` || `b`", my, pg, "", "||"},
		{"`a` div 2", my, pg, "", "div"},
		{"if(`a`, 1, 2)", my, pg, "", "if"},
		{"`a` <=> NULL", my, pg, "", "<=>"},
		{"x::int", pg, pg, "x::int", ""},
	} {
		got, err := translateExpr(c.expr, c.from, c.to)
		if c.err != "" {
			if !errors.Is(err, errNoTranslation) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s (%s to %s): %q, %v; want errNoTranslation naming %s", c.expr, c.from, c.to, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s (%s to %s) = %q, %v; want %q", c.expr, c.from, c.to, got, err, c.want)
		}
	}
}
