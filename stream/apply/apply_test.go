package apply_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
	"github.com/migrate-dev/migrate/stream/apply"
	"github.com/migrate-dev/migrate/stream/pgstream"
)

// lease is the applier's lease in these tests: token 1, an hour long.
type lease struct{ ctx context.Context }

func (l lease) Token() int64             { return 1 }
func (l lease) Owner() string            { return "test" }
func (l lease) Context() context.Context { return l.ctx }
func (l lease) Deadline() time.Time      { return time.Now().Add(time.Hour) }

// syncBuffer is a log's output, safe for the applier's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// follow captures src's changes of table node made by changes (real
// logical replication), applies them into dst with an Applier until dst
// holds src's rows, and returns the applier's log. Both
// databases hold the same node table and rows beforehand; dst also the
// fence column and migrate's helper tables.
func follow(t *testing.T, ddl string, rows string, changes ...string) (log string) {
	t.Helper()
	return followWith(t, followOpts{}, ddl, rows, changes...)
}

// acks records what the applier acknowledged to the source, and what it
// applied.
type acks struct {
	stream.Reader
	mu      sync.Mutex
	acked   []stream.Pos
	applied []stream.Pos
}

func (r *acks) Ack(pos stream.Pos) {
	r.mu.Lock()
	r.acked = append(r.acked, pos)
	r.mu.Unlock()
	r.Reader.Ack(pos)
}

func (r *acks) onApply(a apply.Applied) {
	r.mu.Lock()
	r.applied = append(r.applied, a.Pos)
	r.mu.Unlock()
}

// lists is what was acknowledged and applied so far.
func (r *acks) lists() (acked, applied []stream.Pos) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acked), slices.Clone(r.applied)
}

// followOpts changes follow: setup the applier before it runs, and after
// runs once the target holds the source's rows, the applier still running
// (dst is the target, rec what the applier acknowledged and applied).
type followOpts struct {
	setup func(a *apply.Applier)
	after func(dst *sql.DB, rec *acks)
}

// followWith is follow changed by o.
func followWith(t *testing.T, o followOpts, ddl string, rows string, changes ...string) (log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func() (*sql.DB, plans.DSN) {
		dsn, err := plans.ParseDSN(testsvc.NewPostgresDB(t))
		if err != nil {
			t.Fatal(err)
		}
		db, err := dialect.Postgres{}.Open(dsn, dialect.Session{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db, dsn
	}
	exec := func(db *sql.DB, stmts ...string) {
		t.Helper()
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	src, srcDSN := open()
	dst, _ := open()
	d := dialect.Postgres{}
	exec(src, ddl, rows)
	exec(dst, ddl, rows, "ALTER TABLE node ADD COLUMN _fence bigint NOT NULL DEFAULT 0")
	exec(dst, d.Helpers()...)
	unit := apply.Unit("p")
	if err := fence.New(d).Claim(ctx, dst, unit, 1, "test"); err != nil {
		t.Fatal(err)
	}

	c := pgstream.New(srcDSN, testsvc.Prefix(t))
	t.Cleanup(func() {
		if err := c.Stop(context.Background(), false); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	pos, err := c.Start(ctx, [][2]string{{"public", "node"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := apply.Init(ctx, dst, d, "p", pos, []string{"node"}); err != nil {
		t.Fatal(err)
	}
	exec(src, changes...)
	rd, err := c.Open(ctx, pos)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rec := &acks{Reader: rd}

	var out syncBuffer
	a := &apply.Applier{Target: dst, SQL: d, Fence: fence.New(d), Unit: unit, FenceColumn: "_fence",
		Tables:     []*apply.Table{{Schema: "public", Name: "node", Unit: "node", Target: []string{"node"}, Columns: []string{"id", "parent", "v"}, Key: []string{"id"}}},
		MaxChanges: 1000, MaxWait: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&out, nil)), OnApply: rec.onApply}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	if o.setup != nil {
		o.setup(a)
	}
	go func() { done <- a.Run(actx, lease{ctx}, rec) }()
	// Until the target holds the source's rows (not until a position:
	// the server's WAL position may be read before the changes' commits
	// are written).
	for dump(t, dst) != dump(t, src) {
		select {
		case err := <-done:
			t.Fatalf("the applier ended before it applied the changes: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("the changes were not applied: %v\n%s", ctx.Err(), out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if o.after != nil {
		o.after(dst, rec)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	return out.String()
}

// dump is db's node rows as text.
func dump(t *testing.T, db *sql.DB) string {
	t.Helper()
	var s string
	if err := db.QueryRow(`SELECT coalesce(string_agg(concat_ws(':', id, parent, v), ' ' ORDER BY id), '') FROM node`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApplier_byKey: interleaved inserts, updates and deletes of one
// table, a key deleted and inserted again, in several source transactions,
// are applied by key (no fallback) and leave the source's rows.
func TestApplier_byKey(t *testing.T) {
	t.Parallel()
	log := follow(t, `CREATE TABLE node (id bigint PRIMARY KEY, parent bigint, v text)`,
		`INSERT INTO node SELECT g, NULL, 'v' || g FROM generate_series(1, 20) g`,
		`BEGIN; UPDATE node SET v = 'a' WHERE id = 1; INSERT INTO node VALUES (21, 1, 'n'); DELETE FROM node WHERE id = 2;
		 UPDATE node SET v = 'b' WHERE id = 21; DELETE FROM node WHERE id = 3; INSERT INTO node VALUES (3, NULL, 'again'); COMMIT`,
		`BEGIN; DELETE FROM node WHERE id = 21; UPDATE node SET id = 22 WHERE id = 4; INSERT INTO node VALUES (2, 3, 'back'); COMMIT`,
		`UPDATE node SET v = v || '!' WHERE id % 2 = 0`)
	if strings.Contains(log, "source order") {
		t.Errorf("the applier fell back to source order:\n%s", log)
	}
}

// TestApplier_selfReference: a row moved to another parent, then its old
// parent deleted, in a table whose foreign key refers to itself: applied
// by key, the delete comes first and the target refuses it; the applier
// applies the group again in source order.
func TestApplier_selfReference(t *testing.T) {
	t.Parallel()
	log := follow(t, `CREATE TABLE node (id bigint PRIMARY KEY, parent bigint REFERENCES node (id), v text)`,
		`INSERT INTO node VALUES (1, NULL, 'root'), (3, NULL, 'other root'), (2, 1, 'child')`,
		`BEGIN; UPDATE node SET parent = 3 WHERE id = 2; DELETE FROM node WHERE id = 1; COMMIT`)
	if !strings.Contains(log, "source order") {
		t.Errorf("the applier did not fall back to source order:\n%s", log)
	}
}

// TestApplier_acksDurableOnly: on PostgreSQL the applier commits without
// waiting for the disk except every DurableEvery, and acknowledges to the
// source only the positions of durable commits: here (an hour) the first
// commit, then, once the stream is idle, the last position committed
// again durably. Five source transactions, a group each (MaxChanges 1),
// leave positions applied that are never acknowledged.
func TestApplier_acksDurableOnly(t *testing.T) {
	t.Parallel()
	followWith(t, followOpts{
		setup: func(a *apply.Applier) { a.MaxChanges, a.DurableEvery = 1, time.Hour },
		after: func(dst *sql.DB, rec *acks) {
			deadline := time.Now().Add(30 * time.Second)
			for {
				st, err := apply.Read(context.Background(), dst, dialect.Postgres{}, "p", false)
				if err != nil {
					t.Fatal(err)
				}
				acked, applied := rec.lists()
				// Idle after every source transaction was applied (the
				// stream can also be idle between two of them, when the
				// source sends them apart).
				if len(applied) >= 5 && len(acked) > 0 && acked[len(acked)-1] == st.Pos {
					skipped := 0
					for _, p := range applied {
						if !slices.Contains(acked, p) {
							skipped++
						}
					}
					if skipped == 0 {
						t.Errorf("every applied position was acknowledged at once: %v", acked)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d groups applied (want 5 or more, one per source transaction); the stream's committed position %s was not acknowledged once idle (acknowledged %v)", len(applied), st.Pos, acked)
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
	}, `CREATE TABLE node (id bigint PRIMARY KEY, parent bigint, v text)`,
		`INSERT INTO node SELECT g, NULL, 'v' || g FROM generate_series(1, 5) g`,
		`UPDATE node SET v = 'a' WHERE id = 1`, `UPDATE node SET v = 'b' WHERE id = 2`, `DELETE FROM node WHERE id = 3`,
		`INSERT INTO node VALUES (6, 1, 'n')`, `UPDATE node SET v = 'c' WHERE id = 4`)
}
