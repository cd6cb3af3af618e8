package typemap

import (
	"reflect"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

// A sequenced (AUTO_INCREMENT) MySQL column becomes an integer type
// PostgreSQL can make an identity of: a bigint unsigned one bigint (its
// values are checked by MaxFits), a tinyint(1) one smallint; the unsigned
// types below bigint fit the next wider type whether sequenced or not.
func TestMapColumns_SequencedIsAnInteger(t *testing.T) {
	for _, c := range []struct {
		typ, base string
		seq       bool
		want      string
	}{
		{"bigint(20) unsigned", "bigint", true, "bigint"},
		{"bigint(20) unsigned", "bigint", false, "numeric(20,0)"},
		{"bigint(20)", "bigint", true, "bigint"},
		{"int(10) unsigned", "int", true, "bigint"},
		{"mediumint(8) unsigned", "mediumint", true, "integer"},
		{"smallint(5) unsigned", "smallint", true, "integer"},
		{"tinyint(3) unsigned", "tinyint", true, "smallint"},
		{"tinyint(1)", "tinyint", true, "smallint"},
		{"tinyint(1)", "tinyint", false, "boolean"},
	} {
		cols := []Column{{Name: "id", Type: c.typ, Base: c.base, NotNull: true, Sequenced: c.seq}}
		got, err := MapColumns(plans.MySQL, plans.Postgres, "t", cols, []string{"id"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Type != c.want {
			t.Errorf("%s (sequenced %v): %s, want %s", c.typ, c.seq, got[0].Type, c.want)
		}
		if IntegerType(got[0].Type) != (c.want != "numeric(20,0)" && c.want != "boolean") {
			t.Errorf("IntegerType(%s) = %v", got[0].Type, IntegerType(got[0].Type))
		}
	}
}

func TestMaxFits(t *testing.T) {
	c := Column{Name: "id", Type: "bigint(20) unsigned", Base: "bigint", Sequenced: true}
	if !NeedsMax(plans.MySQL, plans.Postgres, c) || NeedsMax(plans.MySQL, plans.MySQL, c) {
		t.Fatal("NeedsMax: want true toward PostgreSQL only")
	}
	for _, max := range []string{"", "1", "9223372036854775807"} {
		if err := MaxFits("t", c, max); err != nil {
			t.Errorf("max %q: %v", max, err)
		}
	}
	err := MaxFits("t", c, "9223372036854775808")
	if err == nil || !contains(err.Error(), "t.id", "9223372036854775808", `types: {"id": "numeric(20,0)"}`) {
		t.Fatalf("err = %v", err)
	}
}

// bit and spatial columns have no mapping; a plan's type is checked
// against what their values convert to.
func TestMapColumns_BitAndSpatialOverrides(t *testing.T) {
	cols := []Column{{Name: "k", Type: "int", Base: "int"}, {Name: "flag", Type: "bit(1)", Base: "bit"},
		{Name: "flags", Type: "bit(16)", Base: "bit"}, {Name: "at", Type: "point", Base: "point"}}
	my, pg := plans.MySQL, plans.Postgres
	_, err := MapColumns(my, pg, "t", cols, []string{"k"}, nil)
	if err == nil || !contains(err.Error(), "t.flag: bit(1) has no mapping (it converts to boolean,", "t.at: point has no mapping (it converts to bytea") {
		t.Fatalf("no types: err = %v", err)
	}
	good := map[string]string{"flag": "boolean", "flags": "bit varying(16)", "at": "bytea"}
	if _, err := MapColumns(my, pg, "t", cols, []string{"k"}, good); err != nil {
		t.Fatalf("convertible types: %v", err)
	}
	for _, typ := range []string{"integer", "bigint", "numeric(20,0)", "bit(16)", "bytea"} {
		if _, err := MapColumns(my, pg, "t", cols, []string{"k"}, map[string]string{"flag": "boolean", "flags": typ, "at": "bytea"}); err != nil {
			t.Errorf("bit(16) as %s: %v", typ, err)
		}
	}
	_, err = MapColumns(my, pg, "t", cols, []string{"k"}, map[string]string{"flag": "text", "flags": "integer", "at": "text"})
	if err == nil || !contains(err.Error(), "t.flag: bit(1) does not convert to text", "t.at: point does not convert to text (it does to bytea") {
		t.Fatalf("unconvertible types: err = %v", err)
	}
	if _, err := MapColumns(my, my, "t", cols, []string{"k"}, map[string]string{"flag": "text"}); err != nil {
		t.Errorf("MySQL to MySQL: %v", err)
	}
}

func TestConverter_BitAndSpatial(t *testing.T) {
	wkb := []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40} // POINT(1 2)
	for _, c := range []struct {
		name     string
		src, dst Column
		in, want any
		err      string
	}{
		{"bit(1) to boolean", Column{Type: "bit(1)", Base: "bit"}, Column{Type: "boolean", Base: "boolean"}, []byte{1}, true, ""},
		{"bit(1) 0 to boolean", Column{Type: "bit(1)", Base: "bit"}, Column{Type: "boolean", Base: "boolean"}, []byte{0}, false, ""},
		{"bit(2) 2 to boolean", Column{Type: "bit(2)", Base: "bit"}, Column{Type: "boolean", Base: "boolean"}, []byte{2}, nil, "is not a boolean"},
		{"bit(16) to integer", Column{Type: "bit(16)", Base: "bit"}, Column{Type: "integer", Base: "integer"}, []byte{1, 2}, int64(258), ""},
		{"bit(64) to bigint", Column{Type: "bit(64)", Base: "bit"}, Column{Type: "bigint", Base: "bigint"}, []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, nil, "out of range for bigint"},
		{"bit(64) to numeric", Column{Type: "bit(64)", Base: "bit"}, Column{Type: "numeric(20,0)", Base: "numeric"}, []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, "9223372036854775808", ""},
		{"bit(16) to smallint", Column{Type: "bit(16)", Base: "bit"}, Column{Type: "smallint", Base: "smallint"}, []byte{0xff, 0xff}, nil, "out of range"},
		{"bit(5) to bit(5)", Column{Type: "bit(5)", Base: "bit"}, Column{Type: "bit(5)", Base: "bit"}, []byte{5}, "00101", ""},
		{"bit(5) to bit varying", Column{Type: "bit(5)", Base: "bit"}, Column{Type: "bit varying(8)", Base: "bit varying"}, []byte{5}, "00101", ""},
		{"bit(8) to bit(3)", Column{Type: "bit(8)", Base: "bit"}, Column{Type: "bit(3)", Base: "bit"}, []byte{9}, nil, "does not fit bit(3)"},
		{"bit to bytea", Column{Type: "bit(16)", Base: "bit"}, Column{Type: "bytea", Base: "bytea"}, []byte{0, 1}, []byte{0, 1}, ""},
		{"bit to text", Column{Type: "bit(16)", Base: "bit"}, Column{Type: "text", Base: "text"}, []byte{0, 1}, nil, "does not convert to text"},
		{"point to bytea: its WKB", Column{Type: "point", Base: "point"}, Column{Type: "bytea", Base: "bytea"}, append([]byte{0xe6, 0x10, 0, 0}, wkb...), wkb, ""},
		{"point to text", Column{Type: "point", Base: "point"}, Column{Type: "text", Base: "text"}, append([]byte{0, 0, 0, 0}, wkb...), nil, "does not convert to text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Converter(plans.MySQL, plans.Postgres, []Column{c.src}, []Column{c.dst})(0, c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
			form := SourceForm(plans.MySQL, plans.Postgres, []Column{c.src}, []Column{c.dst})
			if again, err := form[0](c.in); err != nil || !reflect.DeepEqual(again, c.want) {
				t.Errorf("SourceForm: %#v %v, want the copy's %#v", again, err, c.want)
			}
		})
	}
	if f := SourceForm(plans.MySQL, plans.MySQL, []Column{{Base: "bit"}}, []Column{{Base: "bit"}}); f != nil {
		t.Error("SourceForm MySQL to MySQL: want values as read (nil)")
	}
	err := Convertible(plans.MySQL, plans.Postgres, "t", []Column{{Name: "g", Type: "point", Base: "point"}}, []Column{{Type: "text", Base: "text"}})
	if err == nil || !contains(err.Error(), "t.g: point does not convert to text") {
		t.Errorf("Convertible: %v", err)
	}
}
