package dialect

import (
	"github.com/migrate-dev/migrate/plans"
)

// collation is the binary NO PAD collation: keys equal in PostgreSQL are
// equal here, no more (case, accents and trailing spaces all count).
func (m MySQL) collation() string {
	if m.MariaDB || !versionAtLeast(m.Version, 8, 0, 0) {
		return "utf8mb4_nopad_bin"
	}
	return "utf8mb4_0900_bin"
}

// CreateTable implements Dialect: Create's table of the columns and key
// alone.
func (m MySQL) CreateTable(table []string, cols []Column, key []string, fence string) string {
	def := &TableDef{Engine: plans.MySQL, Name: table, PrimaryKey: &Index{Name: "PRIMARY", Unique: true}}
	for _, c := range cols {
		def.Columns = append(def.Columns, ColumnDef{Column: c})
	}
	for _, k := range key {
		def.PrimaryKey.Parts = append(def.PrimaryKey.Parts, IndexPart{Column: k})
	}
	return m.Create(def, fence).Table
}

// AddFenceColumn implements Dialect.
func (m MySQL) AddFenceColumn(table []string, fence string) string {
	return "ALTER TABLE " + m.Quote(table...) + " ADD COLUMN " + m.Quote(fence) + " bigint NOT NULL DEFAULT 0"
}

// Helpers implements Dialect. The fence row has a check counter: an UPDATE
// that changes nothing reports no affected row in MySQL.
func (m MySQL) Helpers() []string {
	tail := " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + m.collation()
	return append([]string{
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(FenceTable) + ` (
  plan varchar(191) NOT NULL, tbl varchar(191) NOT NULL, shard int NOT NULL,
  token bigint NOT NULL, owner varchar(255) NOT NULL,
  claimed_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), checks bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (plan, tbl, shard))` + tail,
		`CREATE TABLE IF NOT EXISTS ` + m.Quote(CheckpointTable) + ` (
  plan varchar(191) NOT NULL, tbl varchar(191) NOT NULL, shard int NOT NULL,
  lo_key text, hi_key text, last_key text,
  rows_done bigint NOT NULL DEFAULT 0, token bigint NOT NULL DEFAULT 0,
  state varchar(16) NOT NULL DEFAULT 'pending', updated_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (plan, tbl, shard))` + tail,
		m.postLoadHelper(),
	}, append(append(m.recordsHelpers(), m.streamHelpers()...), m.outboxHelpers()...)...)
}

// SetupLock implements Dialect.
func (MySQL) SetupLock(name string) (string, []any) {
	return "SELECT GET_LOCK(?, 1)", []any{lockName(name)}
}

// SetupUnlock implements Dialect.
func (MySQL) SetupUnlock(name string) (string, []any) {
	return "SELECT RELEASE_LOCK(?)", []any{lockName(name)}
}

// lockName fits MySQL's 64-character lock names.
func lockName(name string) string {
	if len(name) > 64 {
		return name[:64]
	}
	return name
}

// MaxToken implements Dialect.
func (m MySQL) MaxToken(table []string, fence string) string {
	return "SELECT COALESCE(MAX(" + m.Quote(fence) + "), 0) FROM " + m.Quote(table...)
}

// DropTable implements Dialect.
func (m MySQL) DropTable(table []string) string {
	return "DROP TABLE IF EXISTS " + m.Quote(table...)
}

// TransactionalDDL implements Dialect: MySQL's DDL commits itself.
func (MySQL) TransactionalDDL() bool { return false }

// UpsertMatchesAnyUnique implements Dialect: ON DUPLICATE KEY UPDATE fires
// on any unique index.
func (MySQL) UpsertMatchesAnyUnique() bool { return true }

// BytewiseColumn implements Dialect: utf8mb4 in the binary NO PAD
// collation of created tables (CHAR becomes VARCHAR).
func (m MySQL) BytewiseColumn(table []string, c Column) string {
	typ := c.Type
	if c.Base == "char" {
		typ = "var" + typ
	}
	s := "ALTER TABLE " + m.Quote(table...) + " MODIFY " + m.Quote(c.Name) + " " + typ + " CHARACTER SET utf8mb4 COLLATE " + m.collation()
	if c.NotNull {
		s += " NOT NULL"
	}
	return s
}

// KeysetKey implements Dialect: MySQL sorts ENUM and SET by their index
// but compares them as text.
func (MySQL) KeysetKey(c Column) string {
	if c.Base == "enum" || c.Base == "set" {
		return "a MySQL " + c.Base + ", whose sort order differs from its comparison"
	}
	return ""
}
