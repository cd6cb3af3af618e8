package dialect

import (
	"reflect"
	"testing"
)

func TestMySQLWithoutDefiner(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"CREATE ALGORITHM=UNDEFINED DEFINER=`migrate`@`127.0.0.1` SQL SECURITY DEFINER VIEW `v` AS select 1 AS `1`",
			"CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select 1 AS `1`"},
		{"CREATE DEFINER=`it``s`@`%` FUNCTION `f`() RETURNS int\nRETURN 1", "CREATE FUNCTION `f`() RETURNS int\nRETURN 1"},
		{"CREATE DEFINER='app'@'localhost' trigger t before insert on x for each row set @a = 'DEFINER=x'",
			"CREATE trigger t before insert on x for each row set @a = 'DEFINER=x'"},
		{"CREATE DEFINER=`a role` PROCEDURE `p`() SELECT 1", "CREATE PROCEDURE `p`() SELECT 1"},
		{"CREATE DEFINER=app@host VIEW `v` AS select 1", "CREATE VIEW `v` AS select 1"},
		{"CREATE VIEW `v` AS select 'DEFINER=`x`@`y` '", "CREATE VIEW `v` AS select 'DEFINER=`x`@`y` '"},
	} {
		if got := mysqlWithoutDefiner(c.in); got != c.want {
			t.Errorf("mysqlWithoutDefiner(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// A view's needs, from information_schema's definition: views and
// functions of the database, tables it does not copy, anything of
// another database; not its aliases' columns, nor names in literals.
func TestMySQLViewNeeds(t *testing.T) {
	def := "select `c`.`id` AS `id`,`shop`.`order_code`(`c`.`id`) AS `code`,`f2`(1) AS `x`,'`shop`.`secret`' AS `lit` " +
		"from ((`shop`.`customers` `c` join `shop`.`totals` `t` on(`t`.`id` = `c`.`id`)) join `other`.`rates` `r`) " +
		"where `shop`.`c`.`id` in (select `shop`.`page_views`.`customer_id` from `shop`.`page_views`)"
	kinds := map[string]string{"customers": "table", "page_views": "table", "secret": "table", "totals": "view", "order_code": "function", "f2": "function"}
	got := mysqlViewNeeds(def, "shop", kinds, map[string]bool{"shop": true, "other": true}, map[string]bool{"customers": true})
	want := []Ref{
		{Key: "function:order_code", What: "function order_code"},
		{Key: "function:f2", What: "function f2"},
		{Key: "view:totals", What: "view totals"},
		{What: "table other.rates"},
		{What: "table page_views"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mysqlViewNeeds:\n%+v\nwant\n%+v", got, want)
	}
}
