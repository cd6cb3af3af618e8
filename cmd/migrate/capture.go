package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
	"github.com/migrate-dev/migrate/stream/mystream"
	"github.com/migrate-dev/migrate/stream/pgstream"
)

// newCapture is the change capture of the plan's source (nothing is
// connected until it is used).
func newCapture(plan *plans.Plan) stream.Capture {
	if plan.Source.Engine() == plans.Postgres {
		return pgstream.New(plan.Source, plan.Name)
	}
	c := mystream.New(plan.Source, plan.Name, 0)
	c.RawTimes = true // as the source pool reads them (dialect.Session.RawTimes)
	return c
}

// checkFollow checks that the plan's source can stream its changes
// (`validate --follow`): each failed precondition with its fix.
func checkFollow(ctx context.Context, p *plans.Plan) error {
	db, d, err := openDB(ctx, p.Source, dialect.Session{})
	if err != nil {
		return fmt.Errorf("source %s: %w", p.Source, err)
	}
	defer db.Close()
	var errs []error
	if p.Source.Engine() == plans.Postgres {
		var schema string
		if err := db.QueryRowContext(ctx, d.StreamSchema()).Scan(&schema); err != nil {
			return fmt.Errorf("source %s: %w", p.Source, err)
		}
		var pairs [][2]string
		for _, t := range p.Tables {
			id := t.SourceIdent()
			if len(id) == 1 {
				id = []string{schema, id[0]}
			}
			pairs = append(pairs, [2]string{id[0], id[1]})
		}
		errs = pgstream.Check(ctx, db, pairs, pgstream.New(p.Source, p.Name).Slot())
	} else {
		// The binlog must outlast the copy: at a conservative 10,000
		// rows/s, and an hour at least.
		var rows int64
		for _, t := range p.Tables {
			var n int64
			q, args := d.EstimateRows(t.SourceIdent())
			if db.QueryRowContext(ctx, q, args...).Scan(&n) == nil {
				rows += n
			}
		}
		errs = mystream.Check(ctx, db, time.Hour+time.Duration(rows/10000)*time.Second)
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = "  - " + e.Error()
	}
	return fmt.Errorf("%w: the source %s cannot stream its changes for --follow:\n%s", plans.ErrInvalid, p.Source, strings.Join(msgs, "\n"))
}
