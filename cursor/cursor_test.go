package cursor_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// forEachTarget runs fn against a fresh database of every engine holding
// the helper tables, through a pool with the session settings of a 30s
// lease.
func forEachTarget(t *testing.T, fn func(t *testing.T, db *sql.DB, s *cursor.Store)) {
	t.Helper()
	for _, e := range testsvc.Engines { // the checkpoints live in the target (SPEC §5 C1)
		t.Run(e.Name, func(t *testing.T) {
			dsn, err := plans.ParseDSN(e.NewDB(t))
			if err != nil {
				t.Fatal(err)
			}
			d, err := dialect.For(dsn.Engine())
			if err != nil {
				t.Fatal(err)
			}
			db, d, err := dialect.Open(t.Context(), d, dsn, dialect.SessionFor(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			for _, q := range d.Helpers() {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			fn(t, db, cursor.New(d))
		})
	}
}

// newShard names a shard of a plan unique to the test.
func newShard(t *testing.T, table string, index int) fence.Shard {
	t.Helper()
	return fence.Shard{Plan: testsvc.Prefix(t), Table: table, Index: index}
}

// inTx runs fn in a transaction, committed when fn returns nil.
func inTx(t *testing.T, db *sql.DB, fn func(tx *sql.Tx) error) error {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func mustInit(t *testing.T, db *sql.DB, s *cursor.Store, sh fence.Shard, lo, hi any) {
	t.Helper()
	if err := s.Init(t.Context(), db, sh, lo, hi); err != nil {
		t.Fatalf("init %s: %v", sh, err)
	}
}

func mustRead(t *testing.T, q fence.Querier, s *cursor.Store, sh fence.Shard) cursor.Checkpoint {
	t.Helper()
	cp, err := s.Read(t.Context(), q, sh)
	if err != nil {
		t.Fatalf("read %s: %v", sh, err)
	}
	return cp
}

func mustAdvance(t *testing.T, db *sql.DB, s *cursor.Store, sh fence.Shard, key []any, prev, done int64, tok fence.Token) {
	t.Helper()
	if err := inTx(t, db, func(tx *sql.Tx) error { return s.Advance(t.Context(), tx, sh, key, prev, done, tok) }); err != nil {
		t.Fatalf("advance %s to %v: %v", sh, key, err)
	}
}

// progress is what a checkpoint says about the copy, for comparisons.
type progress struct {
	LastKey  []any
	LastText string
	RowsDone int64
	Token    fence.Token
	State    cursor.State
}

func progressOf(cp cursor.Checkpoint) progress {
	return progress{cp.LastKey, cp.LastText, cp.RowsDone, cp.Token, cp.State}
}

func wantProgress(t *testing.T, cp cursor.Checkpoint, want progress) {
	t.Helper()
	if got := progressOf(cp); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: checkpoint %+v, want %+v", cp.Shard, got, want)
	}
}

// pending is a fresh checkpoint's progress.
var pending = progress{State: cursor.Pending}

func TestStore_Init(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		sh := newShard(t, "public.orders", 0)
		if _, err := s.Read(ctx, db, sh); !errors.Is(err, cursor.ErrNoCheckpoint) || !strings.Contains(err.Error(), sh.String()) {
			t.Fatalf("read before init = %v, want ErrNoCheckpoint naming %s", err, sh)
		}
		if _, err := s.ReadForUpdate(ctx, db, sh); !errors.Is(err, cursor.ErrNoCheckpoint) {
			t.Fatalf("locking read before init = %v, want ErrNoCheckpoint", err)
		}
		before := time.Now().Add(-time.Minute) // the server's clock may differ a little
		mustInit(t, db, s, sh, int64(100), int64(200))
		cp := mustRead(t, db, s, sh)
		wantProgress(t, cp, pending)
		if cp.Shard != sh || cp.Lo != "100" || cp.Hi != "200" {
			t.Errorf("shard %v bounds [%#v, %#v), want %v [\"100\", \"200\")", cp.Shard, cp.Lo, cp.Hi, sh)
		}
		if cp.UpdatedAt.Before(before) || cp.UpdatedAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("updated_at %v, want about now", cp.UpdatedAt)
		}

		t.Run("the first instance's bounds win", func(t *testing.T) {
			mustInit(t, db, s, sh, int64(1), nil)
			if cp := mustRead(t, db, s, sh); cp.Lo != "100" || cp.Hi != "200" {
				t.Errorf("bounds [%#v, %#v) after a second init, want the first [\"100\", \"200\")", cp.Lo, cp.Hi)
			}
		})
		t.Run("init keeps the progress", func(t *testing.T) {
			sh := newShard(t, "public.orders", 1)
			mustInit(t, db, s, sh, nil, nil)
			mustAdvance(t, db, s, sh, []any{int64(9)}, 0, 9, 2)
			mustInit(t, db, s, sh, nil, nil)
			wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"9"}, "[9]", 9, 2, cursor.Running})
		})
		t.Run("open and typed bounds", func(t *testing.T) {
			for i, b := range []struct{ lo, hi, wantLo, wantHi any }{
				{nil, nil, nil, nil},
				{nil, "m", nil, "m"},
				{"é😀", nil, "é😀", nil},
				{[]byte{0, 255}, []byte{1}, []byte{0, 255}, []byte{1}},
				{time.Date(2024, 2, 29, 1, 2, 3, 0, time.UTC), nil, "2024-02-29T01:02:03Z", nil},
			} {
				sh := newShard(t, "bounds", i)
				mustInit(t, db, s, sh, b.lo, b.hi)
				cp := mustRead(t, db, s, sh)
				if !reflect.DeepEqual(cp.Lo, b.wantLo) || !reflect.DeepEqual(cp.Hi, b.wantHi) {
					t.Errorf("bounds %#v, %#v read as %#v, %#v; want %#v, %#v", b.lo, b.hi, cp.Lo, cp.Hi, b.wantLo, b.wantHi)
				}
			}
		})
		t.Run("a bound that does not encode", func(t *testing.T) {
			sh := newShard(t, "bad", 0)
			if err := s.Init(ctx, db, sh, struct{}{}, nil); err == nil {
				t.Fatal("init with a struct bound succeeded")
			}
			if _, err := s.Read(ctx, db, sh); !errors.Is(err, cursor.ErrNoCheckpoint) {
				t.Errorf("read after a failed init = %v, want ErrNoCheckpoint", err)
			}
		})
		t.Run("does not wait for a holder's batch", func(t *testing.T) {
			batch, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = batch.Rollback() }()
			if _, err := s.ReadForUpdate(ctx, batch, sh); err != nil {
				t.Fatal(err)
			}
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			if err := s.Init(ictx, db, sh, nil, nil); err != nil {
				t.Fatalf("init while a batch holds the checkpoint: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("init waited %v for the batch's row lock", d)
			}
		})
	})
}

func TestStore_Advance(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		sh := newShard(t, "orders", 0)
		mustInit(t, db, s, sh, nil, nil)
		created := mustRead(t, db, s, sh).UpdatedAt

		time.Sleep(10 * time.Millisecond)
		mustAdvance(t, db, s, sh, []any{int64(1000)}, 0, 1000, 3)
		cp := mustRead(t, db, s, sh)
		wantProgress(t, cp, progress{[]any{"1000"}, "[1000]", 1000, 3, cursor.Running})
		if !cp.UpdatedAt.After(created) {
			t.Errorf("updated_at %v after the advance, want later than %v", cp.UpdatedAt, created)
		}

		mustAdvance(t, db, s, sh, []any{int64(2000)}, 1000, 2000, 3)
		wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"2000"}, "[2000]", 2000, 3, cursor.Running})

		t.Run("a retried batch whose commit was not acknowledged", func(t *testing.T) {
			mustAdvance(t, db, s, sh, []any{int64(2000)}, 1000, 2000, 3)
			wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"2000"}, "[2000]", 2000, 3, cursor.Running})
		})
		t.Run("a new holder records its token", func(t *testing.T) {
			mustAdvance(t, db, s, sh, []any{int64(2500)}, 2000, 2500, 4)
			wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"2500"}, "[2500]", 2500, 4, cursor.Running})
		})
		t.Run("the stored cursor moved", func(t *testing.T) {
			// The holder left the shard at 1000 rows, the target holds 2500.
			err := inTx(t, db, func(tx *sql.Tx) error { return s.Advance(ctx, tx, sh, []any{int64(3000)}, 1000, 3000, 4) })
			if !errors.Is(err, cursor.ErrMoved) || !strings.Contains(err.Error(), sh.String()) {
				t.Fatalf("advance from 1000 when 2500 are stored = %v, want ErrMoved naming %s", err, sh)
			}
			wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"2500"}, "[2500]", 2500, 4, cursor.Running})
		})
		t.Run("no checkpoint", func(t *testing.T) {
			other := newShard(t, "orders", 9)
			err := inTx(t, db, func(tx *sql.Tx) error { return s.Advance(ctx, tx, other, []any{int64(1)}, 0, 1, 4) })
			if !errors.Is(err, cursor.ErrMoved) {
				t.Fatalf("advance of a shard with no checkpoint = %v, want ErrMoved", err)
			}
		})
		t.Run("a key that does not encode", func(t *testing.T) {
			err := inTx(t, db, func(tx *sql.Tx) error { return s.Advance(ctx, tx, sh, []any{nil}, 2500, 2600, 4) })
			if err == nil || errors.Is(err, cursor.ErrMoved) {
				t.Fatalf("advance to a NULL key = %v, want an encoding error", err)
			}
			wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"2500"}, "[2500]", 2500, 4, cursor.Running})
		})
		t.Run("composite and typed keys", func(t *testing.T) {
			ts := time.Date(2024, 2, 29, 1, 2, 3, 123456000, time.UTC)
			for i, k := range []struct {
				key  []any
				text string
				back []any
			}{
				{[]any{int64(-7), "Ab é😀"}, `[-7,"Ab é😀"]`, []any{"-7", "Ab é😀"}},
				{[]any{"12.500", ts}, `["12.500","2024-02-29T01:02:03.123456Z"]`, []any{"12.500", "2024-02-29T01:02:03.123456Z"}},
				{[]any{[]byte{0, 255}, "\x00"}, `[{"hex":"00ff"},"\u0000"]`, []any{[]byte{0, 255}, "\x00"}},
			} {
				sh := newShard(t, "keys", i)
				mustInit(t, db, s, sh, nil, nil)
				mustAdvance(t, db, s, sh, k.key, 0, 1, 1)
				cp := mustRead(t, db, s, sh)
				if cp.LastText != k.text || !reflect.DeepEqual(cp.LastKey, k.back) {
					t.Errorf("key %#v stored as %s, read as %#v; want %s, %#v", k.key, cp.LastText, cp.LastKey, k.text, k.back)
				}
			}
		})
	})
}

// C1: the cursor is one fact with its batch: invisible to others until the
// batch commits, gone when it rolls back.
func TestStore_AdvanceInTransaction(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		sh := newShard(t, "orders", 0)
		mustInit(t, db, s, sh, nil, nil)
		mustAdvance(t, db, s, sh, []any{int64(10)}, 0, 10, 1)
		committed := progress{[]any{"10"}, "[10]", 10, 1, cursor.Running}

		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Advance(ctx, tx, sh, []any{int64(20)}, 10, 20, 1); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, mustRead(t, tx, s, sh), progress{[]any{"20"}, "[20]", 20, 1, cursor.Running})
		wantProgress(t, mustRead(t, db, s, sh), committed) // not yet committed
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		wantProgress(t, mustRead(t, db, s, sh), committed)

		t.Run("a state change rolls back too", func(t *testing.T) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetState(ctx, tx, sh, cursor.Halted, 2); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			wantProgress(t, mustRead(t, db, s, sh), committed)
		})
		t.Run("the next batch goes on from the committed cursor", func(t *testing.T) {
			mustAdvance(t, db, s, sh, []any{int64(20)}, 10, 20, 1)
			wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"20"}, "[20]", 20, 1, cursor.Running})
		})
	})
}

// C2: the takeover's locking read waits for the old holder's batch and then
// sees its commit; while the takeover holds the row, the old holder's next
// advance waits.
func TestStore_ReadForUpdate(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		sh := newShard(t, "orders", 0)
		mustInit(t, db, s, sh, nil, nil)

		batch, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = batch.Rollback() }()
		if err := s.Advance(ctx, batch, sh, []any{int64(5)}, 0, 5, 1); err != nil {
			t.Fatal(err)
		}
		takeover, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = takeover.Rollback() }()
		read := make(chan cursor.Checkpoint, 1)
		readErr := make(chan error, 1)
		go func() {
			cp, err := s.ReadForUpdate(ctx, takeover, sh)
			read <- cp
			readErr <- err
		}()
		select {
		case <-read:
			t.Fatalf("the locking read finished (%v) while the batch held the checkpoint", <-readErr)
		case <-time.After(300 * time.Millisecond):
		}
		if err := batch.Commit(); err != nil {
			t.Fatal(err)
		}
		cp := <-read
		if err := <-readErr; err != nil {
			t.Fatalf("locking read after the batch committed: %v", err)
		}
		wantProgress(t, cp, progress{[]any{"5"}, "[5]", 5, 1, cursor.Running})

		advanced := make(chan error, 1)
		go func() {
			advanced <- inTx(t, db, func(tx *sql.Tx) error { return s.Advance(ctx, tx, sh, []any{int64(9)}, 5, 9, 1) })
		}()
		select {
		case err := <-advanced:
			t.Fatalf("the old holder's advance finished (%v) while the takeover held the checkpoint", err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := s.SetState(ctx, takeover, sh, cursor.Running, 2); err != nil {
			t.Fatal(err)
		}
		if err := takeover.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-advanced; err != nil { // the cursor has not moved: fencing, not the cursor, stops it
			t.Fatalf("advance after the takeover committed: %v", err)
		}
		wantProgress(t, mustRead(t, db, s, sh), progress{[]any{"9"}, "[9]", 9, 1, cursor.Running})
	})
}

func TestStore_SetState(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		sh := newShard(t, "orders", 0)
		mustInit(t, db, s, sh, int64(1), int64(50))
		mustAdvance(t, db, s, sh, []any{int64(7)}, 0, 7, 3)
		for i, st := range []cursor.State{cursor.Halted, cursor.Pending, cursor.Running, cursor.Done} {
			tok := fence.Token(4 + i)
			if err := inTx(t, db, func(tx *sql.Tx) error { return s.SetState(ctx, tx, sh, st, tok) }); err != nil {
				t.Fatalf("set %s: %v", st, err)
			}
			cp := mustRead(t, db, s, sh)
			wantProgress(t, cp, progress{[]any{"7"}, "[7]", 7, tok, st})
			if cp.Lo != "1" || cp.Hi != "50" {
				t.Errorf("bounds [%#v, %#v) after set %s, want [\"1\", \"50\")", cp.Lo, cp.Hi, st)
			}
		}
		if err := s.SetState(ctx, db, newShard(t, "orders", 1), cursor.Done, 1); !errors.Is(err, cursor.ErrNoCheckpoint) {
			t.Errorf("set state of a shard with no checkpoint = %v, want ErrNoCheckpoint", err)
		}
	})
}

func TestStore_Resume(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		plan, other := testsvc.Prefix(t), testsvc.Prefix(t)
		states := map[fence.Shard]cursor.State{
			{Plan: plan, Table: "a", Index: 0}:  cursor.Halted,
			{Plan: plan, Table: "a", Index: 1}:  cursor.Halted,
			{Plan: plan, Table: "a", Index: 2}:  cursor.Running,
			{Plan: plan, Table: "b", Index: 0}:  cursor.Halted,
			{Plan: plan, Table: "b", Index: 1}:  cursor.Done,
			{Plan: other, Table: "a", Index: 0}: cursor.Halted,
		}
		for sh, st := range states {
			mustInit(t, db, s, sh, nil, nil)
			if err := s.SetState(ctx, db, sh, st, 1); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range []struct {
			table string
			shard int
			want  int64
			now   []fence.Shard // set back to pending
		}{
			{"a", 1, 1, []fence.Shard{{Plan: plan, Table: "a", Index: 1}}},
			{"a", 1, 0, nil},
			{"b", 1, 0, nil}, // done stays done
			{"a", -1, 1, []fence.Shard{{Plan: plan, Table: "a", Index: 0}}},
			{"", -1, 1, []fence.Shard{{Plan: plan, Table: "b", Index: 0}}},
			{"", -1, 0, nil},
		} {
			n, err := s.Resume(ctx, db, plan, step.table, step.shard)
			if err != nil || n != step.want {
				t.Fatalf("resume %q shard %d = %d, %v; want %d", step.table, step.shard, n, err, step.want)
			}
			for _, sh := range step.now {
				states[sh] = cursor.Pending
			}
			for sh, st := range states {
				if cp := mustRead(t, db, s, sh); cp.State != st {
					t.Errorf("after resume %q shard %d: %s is %s, want %s", step.table, step.shard, sh, cp.State, st)
				}
			}
		}
	})
}

func TestStore_List(t *testing.T) {
	forEachTarget(t, func(t *testing.T, db *sql.DB, s *cursor.Store) {
		ctx := t.Context()
		plan := testsvc.Prefix(t)
		if cps, err := s.List(ctx, db, plan); err != nil || len(cps) != 0 {
			t.Fatalf("list of a plan with no checkpoints = %v, %v; want none", cps, err)
		}
		shards := []fence.Shard{ // inserted out of order
			{Plan: plan, Table: "public.items", Index: 1},
			{Plan: plan, Table: "public.orders", Index: 0},
			{Plan: plan, Table: "public.items", Index: 0},
			{Plan: plan, Table: "public.items", Index: 10},
		}
		for _, sh := range shards {
			mustInit(t, db, s, sh, nil, nil)
		}
		mustInit(t, db, s, fence.Shard{Plan: testsvc.Prefix(t), Table: "public.items", Index: 0}, nil, nil)
		mustAdvance(t, db, s, shards[0], []any{int64(42), "x"}, 0, 42, 5)
		if err := s.SetState(ctx, db, shards[1], cursor.Done, 6); err != nil {
			t.Fatal(err)
		}
		cps, err := s.List(ctx, db, plan)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			shard fence.Shard
			progress
		}{
			{shards[2], pending},
			{shards[0], progress{[]any{"42", "x"}, `[42,"x"]`, 42, 5, cursor.Running}},
			{shards[3], pending},
			{shards[1], progress{State: cursor.Done, Token: 6}},
		}
		if len(cps) != len(want) {
			t.Fatalf("list = %d checkpoints %+v, want %d", len(cps), cps, len(want))
		}
		for i, w := range want {
			if cps[i].Shard != w.shard {
				t.Errorf("list[%d] is %s, want %s", i, cps[i].Shard, w.shard)
			}
			wantProgress(t, cps[i], w.progress)
			if cps[i].UpdatedAt.IsZero() {
				t.Errorf("list[%d] has no updated_at", i)
			}
		}
	})
}
