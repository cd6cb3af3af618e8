package typemap

import (
	"fmt"
	"strconv"
	"strings"
)

// myType is what is known of a MySQL base type.
type myType struct {
	kind   Kind
	binary bool // values are bytes, not text
	// toPG is the PostgreSQL type of a column of this type. nil: no
	// mapping.
	toPG func(c Column) string
	// keyBytes is the most bytes a value takes in an index key, n being
	// the type's first modifier; nil: 8.
	keyBytes func(n int) int
}

// mysqlTypes are MySQL's base types as information_schema names them
// (data_type; MariaDB's JSON as "json"), with the synonyms a type named
// in a plan may use.
var mysqlTypes = map[string]myType{
	"tinyint":          {kind: Number, toPG: tinyintToPG, keyBytes: fixedKey(1)},
	"smallint":         {kind: Number, toPG: pgUnsigned("smallint", "integer"), keyBytes: fixedKey(2)},
	"mediumint":        {kind: Number, toPG: pgIs("integer"), keyBytes: fixedKey(3 + 3)},
	"int":              {kind: Number, toPG: pgUnsigned("integer", "bigint"), keyBytes: fixedKey(4)},
	"integer":          {kind: Number, toPG: pgUnsigned("integer", "bigint")},
	"bigint":           {kind: Number, toPG: bigintToPG},
	"decimal":          {kind: Number, toPG: decimalToPG, keyBytes: func(n int) int { return n/2 + 2 }},
	"numeric":          {kind: Number, toPG: decimalToPG},
	"year":             {kind: Number, toPG: pgIs("smallint")},
	"float":            {kind: Float, toPG: pgIs("real"), keyBytes: fixedKey(4)},
	"double":           {kind: Float, toPG: pgIs("double precision")},
	"double precision": {kind: Float, toPG: pgIs("double precision")},
	"real":             {kind: Float, toPG: pgIs("double precision")},
	"char":             {kind: Char, toPG: pgSized("char", "1"), keyBytes: perChar(4)},
	"varchar":          {kind: Text, toPG: pgSized("varchar", "255"), keyBytes: perChar(4)},
	"tinytext":         {kind: Text, toPG: pgIs("text")},
	"text":             {kind: Text, toPG: pgIs("text")},
	"mediumtext":       {kind: Text, toPG: pgIs("text")},
	"longtext":         {kind: Text, toPG: pgIs("text")},
	"binary":           {kind: Bytes, binary: true, toPG: pgIs("bytea"), keyBytes: perChar(1)},
	"varbinary":        {kind: Bytes, binary: true, toPG: pgIs("bytea"), keyBytes: perChar(1)},
	"tinyblob":         {kind: Bytes, binary: true, toPG: pgIs("bytea")},
	"blob":             {kind: Bytes, binary: true, toPG: pgIs("bytea")},
	"mediumblob":       {kind: Bytes, binary: true, toPG: pgIs("bytea")},
	"longblob":         {kind: Bytes, binary: true, toPG: pgIs("bytea")},
	// bit(n) has no mapping: bit(1) is not always a flag. A plan names
	// the type, one of bitTargets; the value (its bytes, big-endian) is
	// converted for it (bitToPG).
	"bit":       {kind: Text, binary: true},
	"date":      {kind: Date, toPG: pgIs("date"), keyBytes: fixedKey(3 + 3)},
	"time":      {kind: Time, toPG: pgSized("time", "0"), keyBytes: fixedKey(3 + 3)},
	"datetime":  {kind: Timestamp, toPG: pgSized("timestamp", "0")},
	"timestamp": {kind: Timestamp, toPG: pgSized("timestamptz", "0")},
	"json":      {kind: JSON, toPG: pgIs("jsonb")},
	// ENUM and SET become text: the PostgreSQL renderer adds a CHECK of
	// an ENUM's members (Column.Values); a SET's value is its members
	// joined by commas, as MySQL writes it.
	"enum": {kind: Text, toPG: pgIs("text")},
	"set":  {kind: Text, toPG: pgIs("text")},
	// Spatial types have no mapping either (PostgreSQL has none without
	// PostGIS): a plan names bytea, which gets the value's WKB.
	"geometry":           {kind: Bytes, binary: true},
	"point":              {kind: Bytes, binary: true},
	"linestring":         {kind: Bytes, binary: true},
	"polygon":            {kind: Bytes, binary: true},
	"multipoint":         {kind: Bytes, binary: true},
	"multilinestring":    {kind: Bytes, binary: true},
	"multipolygon":       {kind: Bytes, binary: true},
	"geometrycollection": {kind: Bytes, binary: true},
	"geomcollection":     {kind: Bytes, binary: true},
}

// mySQLToPG maps a MySQL column to a PostgreSQL type. c.Type is MySQL's
// column_type, e.g. "int(10) unsigned", "tinyint(1)", "enum('a','b')".
func mySQLToPG(c Column) (string, error) {
	if t := mysqlTypes[c.Base]; t.toPG != nil {
		return t.toPG(c), nil
	}
	switch {
	case c.Base == "bit":
		return "", fmt.Errorf("%s has no mapping (it converts to %s)", c.Type, strings.Join(bitTargetNames, ", "))
	case geometry(c.Base):
		return "", fmt.Errorf("%s has no mapping (it converts to bytea, as WKB)", c.Type)
	}
	return "", fmt.Errorf("%s has no mapping", c.Type)
}

// pgIs maps every column of a type to the PostgreSQL type t.
func pgIs(t string) func(Column) string { return func(Column) string { return t } }

// pgUnsigned maps a column to the PostgreSQL type signed, or unsigned when
// it is.
func pgUnsigned(signed, unsigned string) func(Column) string {
	return func(c Column) string {
		if strings.Contains(c.Type, "unsigned") {
			return unsigned
		}
		return signed
	}
}

// pgSized maps a column to the PostgreSQL type t with the column's first
// modifier, def when it has none.
func pgSized(t, def string) func(Column) string {
	return func(c Column) string { return t + "(" + firstOr(args(c.Type), def) + ")" }
}

// tinyintToPG: tinyint(1) is MySQL's boolean, unless it is sequenced.
func tinyintToPG(c Column) string {
	if a := args(c.Type); !c.Sequenced && !strings.Contains(c.Type, "unsigned") && len(a) == 1 && a[0] == "1" {
		return "boolean"
	}
	return "smallint"
}

// bigintToPG: an unsigned bigint's values need numeric(20,0), unless it
// is sequenced: an identity is an integer type, and bigint holds the
// values of a counter that has not passed 2^63-1 (which whoever creates
// the table checks in the source: MaxFits).
func bigintToPG(c Column) string {
	if strings.Contains(c.Type, "unsigned") && !c.Sequenced {
		return "numeric(20,0)"
	}
	return "bigint"
}

func decimalToPG(c Column) string {
	if a := args(c.Type); len(a) == 2 {
		return "numeric(" + a[0] + "," + a[1] + ")"
	}
	return "numeric(10,0)"
}

// mysqlKeyBytes is the most bytes a MySQL type takes in an index key.
func mysqlKeyBytes(t string) int {
	kb := mysqlTypes[baseOf(t)].keyBytes
	if kb == nil {
		return 8 // bigint, double, datetime, timestamp
	}
	n := 0
	if a := args(t); len(a) > 0 {
		n, _ = strconv.Atoi(a[0])
	}
	return kb(n)
}

// fixedKey is a key size whatever the modifier.
func fixedKey(n int) func(int) int { return func(int) int { return n } }

// perChar is a key size of per bytes for each of n characters.
func perChar(per int) func(int) int { return func(n int) int { return per * n } }
