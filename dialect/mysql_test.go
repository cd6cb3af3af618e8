package dialect

import (
	"strings"
	"testing"
	"time"
)

func TestMySQL_Quote(t *testing.T) {
	if got, want := (MySQL{}).Quote("shop", "or`ders"), "`shop`.`or``ders`"; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func TestMySQL_SelectPage(t *testing.T) {
	m := MySQL{}
	cases := []struct {
		name  string
		key   []string
		after bool
		r     Range
		sql   string
		args  []int
	}{
		{"first page", []string{"id"}, false, Range{}, "SELECT `id`, `v` FROM `t` ORDER BY `id` LIMIT 500", nil},
		{"after", []string{"id"}, true, Range{Hi: 9}, "SELECT `id`, `v` FROM `t` WHERE `id` > ? AND `id` <= ? ORDER BY `id` LIMIT 500", []int{0, 2}},
		{"composite", []string{"id", "v"}, true, Range{Lo: 1},
			"SELECT `id`, `v` FROM `t` WHERE `id` >= ? AND ((`id` > ?) OR (`id` = ? AND `v` > ?)) AND `id` > ? ORDER BY `id`, `v` LIMIT 500",
			[]int{0, 0, 0, 1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := m.SelectPage([]string{"t"}, []string{"id", "v"}, c.key, c.after, c.r, 500)
			if q.SQL != c.sql || len(q.Args) != len(c.args) {
				t.Fatalf("got  %s %v\nwant %s %v", q.SQL, q.Args, c.sql, c.args)
			}
			for i := range c.args {
				if q.Args[i] != c.args[i] {
					t.Fatalf("args %v, want %v", q.Args, c.args)
				}
			}
		})
	}
}

// WithColumns makes the row reads of a table read its FLOAT columns as
// doubles; other tables, and the dialect it was given, are unchanged.
func TestMySQL_WithColumns(t *testing.T) {
	m := MySQL{MariaDB: true}
	d := WithColumns(m, []string{"s", "t"}, []Column{{Name: "id", Base: "bigint"}, {Name: "x", Base: "float"}, {Name: "y", Base: "double"}})
	cols, key := []string{"id", "x", "y"}, []string{"id"}
	if got, want := d.SelectPage([]string{"s", "t"}, cols, key, false, Range{}, 5).SQL,
		"SELECT `id`, `x` + 0e0, `y` FROM `s`.`t` ORDER BY `id` LIMIT 5"; got != want {
		t.Errorf("SelectPage\n got %s\nwant %s", got, want)
	}
	if got, want := d.SelectLast([]string{"s", "t"}, cols, key, Range{}, 5).SQL,
		"SELECT `id`, `x` + 0e0, `y` FROM `s`.`t` WHERE `id` <= ? ORDER BY `id` DESC LIMIT 5"; got != want {
		t.Errorf("SelectLast\n got %s\nwant %s", got, want)
	}
	if got, want := d.SelectByKeys([]string{"s", "t"}, cols, key, 2),
		"SELECT `id`, `x` + 0e0, `y` FROM `s`.`t` WHERE `id` IN (?, ?)"; got != want {
		t.Errorf("SelectByKeys\n got %s\nwant %s", got, want)
	}
	for name, q := range map[string]string{
		"another table":     d.SelectByKeys([]string{"t"}, cols, key, 1),
		"the dialect given": m.SelectByKeys([]string{"s", "t"}, cols, key, 1),
	} {
		if strings.Contains(q, "0e0") {
			t.Errorf("%s: %s reads a column as a double", name, q)
		}
	}
	if WithColumns(Postgres{}, []string{"t"}, []Column{{Name: "x", Base: "real"}}) != (Postgres{}) {
		t.Error("WithColumns changed the PostgreSQL dialect")
	}
}

// The fence column is assigned last: MySQL evaluates the assignments left to
// right, and every earlier guard must read the stored token.
func TestMySQL_Upsert(t *testing.T) {
	cols, key := []string{"id", "a"}, []string{"id"}
	t.Run("MariaDB: VALUES()", func(t *testing.T) {
		u := MySQL{MariaDB: true}.Upsert([]string{"t"}, cols, key, "_fence", 2)
		want := "INSERT INTO `t` (`id`, `a`, `_fence`) VALUES (?, ?, ?), (?, ?, ?) ON DUPLICATE KEY UPDATE " +
			"`a` = IF(`_fence` <= VALUES(`_fence`), VALUES(`a`), `a`), `_fence` = IF(`_fence` <= VALUES(`_fence`), VALUES(`_fence`), `_fence`)"
		if u.SQL != want || !u.TokenPerRow || u.Returns {
			t.Errorf("got  %s\nwant %s", u.SQL, want)
		}
		if probe := "SELECT COUNT(*), COALESCE(SUM(`_fence` > ?), 0) FROM `t` WHERE `id` IN (?, ?)"; u.Probe != probe {
			t.Errorf("probe %s\nwant  %s", u.Probe, probe)
		}
	})
	t.Run("MySQL 8.0.19+: row alias", func(t *testing.T) {
		u := MySQL{RowAlias: true, Version: "8.0.36"}.Upsert([]string{"t"}, cols, key, "_fence", 1)
		want := "INSERT INTO `t` (`id`, `a`, `_fence`) VALUES (?, ?, ?) AS `new` ON DUPLICATE KEY UPDATE " +
			"`a` = IF(`_fence` <= `new`.`_fence`, `new`.`a`, `a`), `_fence` = IF(`_fence` <= `new`.`_fence`, `new`.`_fence`, `_fence`)"
		if u.SQL != want {
			t.Errorf("got  %s\nwant %s", u.SQL, want)
		}
	})
	t.Run("composite probe", func(t *testing.T) {
		u := MySQL{}.Upsert([]string{"t"}, []string{"a", "b", "c"}, []string{"a", "b"}, "_fence", 2)
		if probe := "SELECT COUNT(*), COALESCE(SUM(`_fence` > ?), 0) FROM `t` WHERE (`a`, `b`) IN ((?, ?), (?, ?))"; u.Probe != probe {
			t.Errorf("probe %s\nwant  %s", u.Probe, probe)
		}
	})
}

func TestMySQL_Variant(t *testing.T) {
	for v, want := range map[string][2]bool{ // RowAlias, MariaDB
		"10.11.19-MariaDB-0+deb12u1": {false, true},
		"8.0.18":                     {false, false},
		"8.0.19":                     {true, false},
		"8.4.3":                      {true, false},
		"5.7.44-log":                 {false, false},
	} {
		if m := mysqlFor(v); m.RowAlias != want[0] || m.MariaDB != want[1] {
			t.Errorf("%s: row alias %v mariadb %v, want %v", v, m.RowAlias, m.MariaDB, want)
		}
	}
	if (MySQL{MariaDB: true}).collation() != "utf8mb4_nopad_bin" || (MySQL{Version: "8.0.36"}).collation() != "utf8mb4_0900_bin" {
		t.Error("collation: want utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL 8")
	}
}

func TestMySQL_BoundTx(t *testing.T) {
	q, args := MySQL{}.BoundTx(2500 * time.Millisecond)
	if !strings.HasSuffix(q, "SESSION wait_timeout = ?, SESSION innodb_lock_wait_timeout = ?, SESSION net_read_timeout = ?, SESSION net_write_timeout = ?") || len(args) != 4 || args[0] != int64(2) || args[3] != int64(2) {
		t.Errorf("got %s %v", q, args)
	}
	if _, args := (MySQL{}).BoundTx(300 * time.Millisecond); args[0] != int64(1) {
		t.Errorf("under a second: %v, want 1 (MySQL's least)", args)
	}
}
