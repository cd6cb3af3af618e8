package dialect

// Create implements Definitions.
func (m MySQL) Create(def *TableDef, fence string) Created { return Created{} }

// ForeignKeySteps implements Definitions.
func (m MySQL) ForeignKeySteps(def *TableDef) []Step { return nil }

// DropForeignKey implements Definitions.
func (m MySQL) DropForeignKey(table []string, name string) string { return "" }

// SequenceSteps implements Definitions.
func (m MySQL) SequenceSteps(def *TableDef) []Step { return nil }
