package apply

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// statement is one statement of a target transaction: its text, its
// arguments, what it does (for its error), and whether it applies changes
// (an op's, not the stream's count or position).
type statement struct {
	sql  string
	args []any
	what string
	op   bool
}

// stmtError is the failure of a statement.
type stmtError struct {
	op  bool // of an op's statement
	err error
}

func (e *stmtError) Error() string { return e.err.Error() }
func (e *stmtError) Unwrap() error { return e.err }

// fail is s's failure err.
func (s statement) fail(err error) error {
	return &stmtError{op: s.op, err: fmt.Errorf("%s: %w", s.what, err)}
}

// statements are an upsert's or a delete's statements, in chunks that fit
// the statement's parameters.
func (a *Applier) statements(o *op) []statement {
	t := o.t
	var out []statement
	switch o.kind {
	case upsert:
		live := slices.DeleteFunc(o.rows, func(r []any) bool { return r == nil }) // nil: deleted after
		for rows := range chunks(live, a.SQL.MaxParams()/len(t.Columns)) {
			out = append(out, statement{a.stmt(t, upsert, len(rows)), flat(rows), fmt.Sprintf("apply %d upserts to %s", len(rows), t.Unit), true})
		}
	case del:
		for keys := range chunks(o.rows, a.SQL.MaxParams()/len(t.Key)) {
			out = append(out, statement{a.stmt(t, del, len(keys)), flat(keys), fmt.Sprintf("apply %d deletes to %s", len(keys), t.Unit), true})
		}
	}
	return out
}

// pgxConn is the driver connection of pgx's database/sql driver.
type pgxConn interface{ Conn() *pgx.Conn }

// exec runs stmts in tx, in order; the first that fails is a *stmtError.
// On a PostgreSQL target (pgx's connection under conn) they go as one
// batch: every statement sent before the first result is read, one round
// trip instead of one each; the first that fails aborts the transaction,
// as it would one by one.
func (a *Applier) exec(ctx context.Context, conn *sql.Conn, tx *sql.Tx, stmts []statement) error {
	if len(stmts) > 1 && conn != nil {
		batched := false
		err := conn.Raw(func(dc any) error {
			c, ok := dc.(pgxConn)
			if !ok {
				return nil
			}
			batched = true
			b := &pgx.Batch{}
			for _, s := range stmts {
				b.Queue(s.sql, s.args...)
			}
			br := c.Conn().SendBatch(ctx, b)
			for _, s := range stmts {
				if _, err := br.Exec(); err != nil {
					_ = br.Close()
					return s.fail(err)
				}
			}
			return br.Close()
		})
		if batched || err != nil {
			return err
		}
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s.sql, s.args...); err != nil {
			return s.fail(err)
		}
	}
	return nil
}
