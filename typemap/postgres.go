package typemap

import (
	"fmt"
	"strconv"
	"strings"
)

// pgType is what is known of a PostgreSQL base type.
type pgType struct {
	kind Kind
	// toMySQL is the MySQL type of a column of this type; an unbounded key
	// column gets share bytes of the index key. nil: no mapping.
	toMySQL func(c Column, key bool, share int) (string, error)
}

// postgresTypes are PostgreSQL's base types as the catalog names them
// (format_type; "enum" for any enum), and as MapColumns spells the
// PostgreSQL types it maps MySQL columns to.
var postgresTypes = map[string]pgType{
	"smallint":                    {Number, mysqlIs("smallint")},
	"integer":                     {Number, mysqlIs("int")},
	"bigint":                      {Number, mysqlIs("bigint")},
	"numeric":                     {Number, numericToMySQL},
	"real":                        {Float, mysqlIs("float")},
	"double precision":            {Float, mysqlIs("double")},
	"character varying":           {Text, textToMySQL},
	"text":                        {Text, textToMySQL},
	"character":                   {Char, charToMySQL},
	"bpchar":                      {Char, charToMySQL},
	"boolean":                     {Bool, mysqlIs("tinyint(1)")},
	"date":                        {Date, mysqlIs("date")},
	"time without time zone":      {Time, timeToMySQL},
	"timestamp without time zone": {Timestamp, timestampToMySQL},
	"timestamp with time zone":    {Timestamp, timestampToMySQL},
	"uuid":                        {UUID, mysqlIs("char(36)")},
	"json":                        {JSON, mysqlIs("json")},
	"jsonb":                       {JSON, mysqlIs("json")},
	"bytea":                       {Bytes, byteaToMySQL},
	"enum":                        {Text, mysqlIs("varchar(255)")},

	// Names of mapped columns only (mySQLToPG), never read from the
	// catalog.
	"timestamp":   {Timestamp, nil},
	"timestamptz": {Timestamp, nil},
	"time":        {Time, nil},
	"char":        {Char, nil},
	"varchar":     {Text, nil},
}

// pgToMySQL maps a PostgreSQL column to a MySQL type; an unbounded key
// column gets share bytes of the index key.
//
// An enum whose labels are known (Values) becomes a MySQL ENUM of them,
// which sorts and compares them in the same order; varchar(255) when
// MySQL would not keep a label as it is (it strips trailing spaces, and
// its collations make labels differing in case alone duplicates). A
// domain maps as its base type does (Base: the catalog's base of the
// domain). An array, a tsvector or a built-in range becomes longtext
// holding PostgreSQL's text form of the value, exactly as read (a JSON
// column would need the value converted; no key column takes them).
func pgToMySQL(c Column, key bool, share int) (string, error) {
	if c.Base == "enum" && len(c.Values) > 0 {
		if e, ok := mysqlEnum(c.Values); ok {
			return e, nil
		}
	}
	if strings.HasSuffix(c.Base, "[]") || pgTextForm[c.Base] {
		if key {
			return "", fmt.Errorf("%s has no MySQL key type", c.Type)
		}
		return "longtext", nil
	}
	if t := postgresTypes[c.Base]; t.toMySQL != nil {
		return t.toMySQL(c, key, share)
	}
	return "", fmt.Errorf("%s has no mapping", c.Type)
}

// mysqlIs maps every column of a type to the MySQL type t.
func mysqlIs(t string) func(Column, bool, int) (string, error) {
	return func(Column, bool, int) (string, error) { return t, nil }
}

func numericToMySQL(c Column, _ bool, _ int) (string, error) {
	a := args(c.Type)
	if len(a) != 2 {
		return "", fmt.Errorf("%s has no precision and scale", c.Type)
	}
	p, _ := strconv.Atoi(a[0])
	s, _ := strconv.Atoi(a[1])
	if p > 65 || s > 30 || s < 0 {
		return "", fmt.Errorf("%s exceeds MySQL's decimal(65,30)", c.Type)
	}
	return "decimal(" + a[0] + "," + a[1] + ")", nil
}

func textToMySQL(c Column, key bool, share int) (string, error) {
	if a := args(c.Type); c.Base == "character varying" && a != nil {
		return "varchar(" + a[0] + ")", nil
	}
	if key {
		return "varchar(" + strconv.Itoa(share/4) + ")", nil
	}
	return "longtext", nil
}

func charToMySQL(c Column, _ bool, _ int) (string, error) {
	n := "1"
	if a := args(c.Type); a != nil {
		n = a[0]
	}
	if v, _ := strconv.Atoi(n); v > 255 {
		return "varchar(" + n + ")", nil
	}
	return "char(" + n + ")", nil
}

func timeToMySQL(c Column, _ bool, _ int) (string, error) {
	return "time(" + precision(c.Type) + ")", nil
}

func timestampToMySQL(c Column, _ bool, _ int) (string, error) {
	return "datetime(" + precision(c.Type) + ")", nil
}

func byteaToMySQL(_ Column, key bool, share int) (string, error) {
	if key {
		return "varbinary(" + strconv.Itoa(share) + ")", nil
	}
	return "longblob", nil
}

// precision is the fractional-seconds precision of a time type, 6 when not
// given.
func precision(typ string) string {
	if a := args(typ); len(a) == 1 {
		return a[0]
	}
	return "6"
}

// unboundedKey is a PostgreSQL column with no length, which a MySQL key
// must give one.
func unboundedKey(c Column) bool {
	return c.Base == "text" || c.Base == "bytea" || c.Base == "character varying" && args(c.Type) == nil
}

// pgTextForm are the types a MySQL longtext holds in their text form.
var pgTextForm = map[string]bool{
	"tsvector": true, "int4range": true, "int8range": true, "numrange": true, "tsrange": true, "tstzrange": true, "daterange": true,
	"int4multirange": true, "int8multirange": true, "nummultirange": true, "tsmultirange": true, "tstzmultirange": true, "datemultirange": true,
}

// mysqlEnum is a MySQL ENUM of labels, or false when MySQL would not keep
// them as they are: a label with trailing spaces, longer than 255
// characters, empty (MySQL's error value), or equal to another but for
// case (MySQL's default collations ignore it).
func mysqlEnum(labels []string) (string, bool) {
	seen := map[string]bool{}
	q := make([]string, len(labels))
	for i, l := range labels {
		low := strings.ToLower(l)
		if l == "" || strings.TrimRight(l, " ") != l || len([]rune(l)) > 255 || seen[low] {
			return "", false
		}
		seen[low] = true
		q[i] = MySQLString(l)
	}
	return "enum(" + strings.Join(q, ",") + ")", true
}

// MySQLString quotes s as a MySQL string literal for DDL (enum members,
// defaults, comments): a quote doubled, a backslash escaped (sessions do
// not run with NO_BACKSLASH_ESCAPES), NUL and ^Z escaped.
func MySQLString(s string) string {
	return "'" + mysqlStringEscaper.Replace(s) + "'"
}

var mysqlStringEscaper = strings.NewReplacer(`\`, `\\`, `'`, `''`, "\x00", `\0`, "\x1a", `\Z`)
