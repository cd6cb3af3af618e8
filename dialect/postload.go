package dialect

// PostLoadTable is the helper table holding a plan's post-load steps.
const PostLoadTable = "_migrate_postload"

// PostLoad is the statements of the post-load steps' table: each step a
// plan's setup recorded (a secondary index, a foreign key), in the order
// they run, and whether it is done.
type PostLoad interface {
	// PostLoadHelper creates the steps' table if missing.
	PostLoadHelper() string
	// PostLoadInsert records a step: args plan, seq, kind, tbl, name,
	// stmt, exists_sql, exists_args (JSON).
	PostLoadInsert() string
	// PostLoadList yields (seq, kind, tbl, name, stmt, exists_sql,
	// exists_args, state) of a plan's steps in the order they run (by
	// kind: indexes before foreign keys, then seq): args plan.
	PostLoadList() string
	// PostLoadDone marks a step done: args token, plan, seq.
	PostLoadDone() string
}

// postLoadOrder orders steps by kind, then as recorded.
const postLoadOrder = ` ORDER BY CASE kind WHEN 'sequence' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, seq`
