package batch_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/batch"
	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
)

// renewing is a lease renewed every ttl/3 whose local deadline is, like
// lock.Lease's, the renewal's send time plus 0.89 × ttl.
type renewing struct {
	ctx      context.Context
	mu       sync.Mutex
	deadline time.Time
}

func newRenewing(t *testing.T, ttl time.Duration) *renewing {
	ctx, cancel := context.WithCancel(context.Background())
	l := &renewing{ctx: ctx, deadline: time.Now().Add(ttl * 89 / 100)}
	go func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				l.mu.Lock()
				l.deadline = now.Add(ttl * 89 / 100)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return l
}

func (l *renewing) Context() context.Context { return l.ctx }
func (l *renewing) Token() int64             { return 1 }
func (l *renewing) Owner() string            { return owner }
func (l *renewing) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// A batch that takes longer than about 0.45 × TTL can never find twice its
// time left before the deadline. The holder used to wait for that runway
// forever, renewing its lease with nothing written; now it writes smaller
// batches, each with its own cursor (issue 12, item 1).
func TestCopier_BatchLongerThanRunwayIsSplit(t *testing.T) {
	e := setup(t, 1000, 1)
	// Every target row costs 1ms or more to write: the batch of 1000 takes
	// over 1s, more than the 0.89s a 1s lease gives at most.
	mustExec(t, e.dst, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.001); RETURN NEW; END $$`)
	mustExec(t, e.dst, `CREATE TRIGGER slow BEFORE INSERT OR UPDATE ON items FOR EACH ROW EXECUTE FUNCTION slow()`)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var batches []int64
	e.copier.OnBatch = func(_ fence.Shard, p batch.Committed) { batches = append(batches, p.Rows) }
	res, err := e.copier.Copy(ctx, e.spec, newRenewing(t, time.Second), cursor.Checkpoint{})
	if err != nil {
		t.Fatalf("Copy = %v after %d batches %v", err, len(batches), batches)
	}
	t.Logf("batches %v", batches)
	if res.Rows != 1000 {
		t.Errorf("copied %d rows, want 1000", res.Rows)
	}
	if len(batches) < 2 {
		t.Errorf("batches %v: want the page of 1000 rows written in smaller batches", batches)
	}
	if n := count(t, e.dst, `SELECT count(*) FROM items`); n != 1000 {
		t.Errorf("target has %d rows, want 1000", n)
	}
	cp, err := e.cursor.Read(t.Context(), e.dst, e.spec.Shard)
	if err != nil || cp.RowsDone != 1000 {
		t.Errorf("checkpoint %+v (%v), want 1000 rows done", cp, err)
	}
}

// When not even one row fits the runway, the shard halts and says why,
// instead of holding the lease with nothing written.
func TestCopier_RowLongerThanRunwayHalts(t *testing.T) {
	e := setup(t, 50, 1)
	mustExec(t, e.dst, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$`)
	mustExec(t, e.dst, `CREATE TRIGGER slow AFTER INSERT OR UPDATE ON items FOR EACH STATEMENT EXECUTE FUNCTION slow()`)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := e.copier.Copy(ctx, e.spec, newRenewing(t, 400*time.Millisecond), cursor.Checkpoint{})
	if !errors.Is(err, hold.ErrHalted) || !strings.Contains(err.Error(), "raise lease_ttl") {
		t.Fatalf("Copy = %v, want hold.ErrHalted naming lease_ttl", err)
	}
}
