package typemap

import "testing"

// Every base type name, of either engine or as MapColumns spells a mapped
// one, has the kind verification has always given it; any other is text.
func TestKindOf(t *testing.T) {
	for kind, bases := range map[Kind][]string{
		Number:    {"smallint", "integer", "bigint", "int", "tinyint", "mediumint", "numeric", "decimal", "year"},
		Float:     {"real", "double precision", "float", "double"},
		Bool:      {"boolean"},
		Timestamp: {"timestamp without time zone", "timestamp with time zone", "timestamp", "timestamptz", "datetime"},
		Date:      {"date"},
		Time:      {"time without time zone", "time"},
		UUID:      {"uuid"},
		JSON:      {"json", "jsonb"},
		Bytes:     {"bytea", "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"},
		Char:      {"character", "bpchar", "char"},
		Text:      {"text", "character varying", "varchar", "longtext", "enum", "set", "bit", "interval", "inet", ""},
	} {
		for _, b := range bases {
			if got := KindOf(b); got != kind {
				t.Errorf("KindOf(%q) = %v, want %v", b, got, kind)
			}
		}
	}
}

// A name both engines use means one kind, so that KindOf need not know the
// engine.
func TestKindOf_EnginesAgree(t *testing.T) {
	for base, pg := range postgresTypes {
		if my, ok := mysqlTypes[base]; ok && my.kind != pg.kind {
			t.Errorf("%q: PostgreSQL kind %v, MySQL kind %v", base, pg.kind, my.kind)
		}
	}
}

func TestPair(t *testing.T) {
	for _, c := range []struct {
		src, dst string
		want     Kind
	}{
		{"boolean", "tinyint", Bool},
		{"tinyint", "boolean", Bool},
		{"uuid", "char", UUID},
		{"jsonb", "longtext", JSON},
		{"timestamp with time zone", "datetime", Timestamp},
		{"character", "varchar", Char},
		{"numeric", "decimal", Number},
	} {
		if got := Pair(c.src, c.dst); got != c.want {
			t.Errorf("Pair(%s, %s) = %v, want %v", c.src, c.dst, got, c.want)
		}
	}
}

// The MySQL types whose values are bytes, as read and as written.
func TestMySQLBinary(t *testing.T) {
	for _, b := range []string{"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit"} {
		if !MySQLBinary(b) {
			t.Errorf("MySQLBinary(%q) = false", b)
		}
	}
	for _, b := range []string{"char", "varchar", "text", "longtext", "json", "enum", "bytea"} {
		if MySQLBinary(b) {
			t.Errorf("MySQLBinary(%q) = true", b)
		}
	}
}
