package dialect

// PostLoadTable is the helper table holding a plan's post-load steps.
const PostLoadTable = "_migrate_postload"

// PostLoad is the statements of the post-load steps' table: each step a
// plan's setup recorded (a secondary index, a foreign key, a schema
// object of a same-engine copy), in the order they run, and whether it
// is done.
type PostLoad interface {
	// PostLoadInsert records a step: args plan, seq, kind, tbl, name,
	// stmt, exists_sql, exists_args (JSON).
	PostLoadInsert() string
	// PostLoadList yields (seq, kind, tbl, name, stmt, exists_sql,
	// exists_args, state) of a plan's steps in the order they run (by
	// kind: indexes, foreign keys, then schema objects; then seq): args
	// plan.
	PostLoadList() string
	// PostLoadDone marks a step done: args token, plan, seq.
	PostLoadDone() string
	// PostLoadState sets the phase's state (its row, seq 0): args state,
	// token, plan.
	PostLoadState() string
	// PostLoadResume sets a halted phase back to pending: args plan.
	PostLoadResume() string
}

// The phase's own row in the steps' table: seq 0, kind PostLoadPhase,
// state pending, running, done or halted.
const PostLoadPhase = "phase"

// postLoadOrder orders steps by kind, then as recorded: the schema
// objects (Objects) last, in the order recorded, each after what it
// depends on.
const postLoadOrder = ` ORDER BY CASE kind WHEN 'phase' THEN 0 WHEN 'sequence' THEN 1 WHEN 'index' THEN 2 WHEN 'foreign key' THEN 3 ELSE 4 END, seq`
