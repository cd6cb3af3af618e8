package dialect

// Create implements Definitions.
func (p Postgres) Create(def *TableDef, fence string) Created { return Created{} }

// ForeignKeySteps implements Definitions.
func (p Postgres) ForeignKeySteps(def *TableDef) []Step { return nil }

// DropForeignKey implements Definitions.
func (p Postgres) DropForeignKey(table []string, name string) string { return "" }

// SequenceSteps implements Definitions.
func (p Postgres) SequenceSteps(def *TableDef) []Step { return nil }
