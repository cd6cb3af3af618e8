package dialect

import (
	"context"
	"database/sql"
)

// Step kinds of the schema objects a same-engine copy creates after the
// data (Objects), after the foreign keys, in the order setup recorded
// them: each after what it depends on.
const (
	StepFunction         = "function"
	StepProcedure        = "procedure"
	StepView             = "view"
	StepMaterializedView = "materialized view"
	StepTrigger          = "trigger"
)

// SchemaObject is a view, materialized view, function, procedure or
// trigger of the source, with the step creating it in a database of the
// same engine.
type SchemaObject struct {
	Object // Kind, Name, Key as NotMigrated gives them
	Step   Step
	// Needs are what it needs in the target before it: other objects
	// (by Key) and the tables it reads or is on that the plan does not
	// copy under their own name (Key "": it cannot be created).
	Needs []Ref
}

// Ref is what a schema object needs: another object by its Key, or
// (Key "") a table the plan does not copy under its own name.
type Ref struct {
	Key  string
	What string // "table public.page_views", "function public.f(integer)"
}

// TxBeginner opens a transaction: a pool or a connection.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Objects reads the schema objects besides tables that a copy between
// two databases of this engine creates in its post-load phase, after the
// data: those of the schemas of tables (PostgreSQL) or of the DSN's
// database (MySQL), functions and procedures, views and materialized
// views, and the triggers on tables (and, PostgreSQL, on those views).
// tables are the tables the plan copies under their own name; an object
// reading or on another table has it in Needs. Objects belonging to an
// extension, aggregates and C functions are not among them (NotMigrated
// lists them). The order is functions, views, triggers, each by name.
type Objects interface {
	SchemaObjects(ctx context.Context, db TxBeginner, tables [][]string) ([]SchemaObject, error)
}
