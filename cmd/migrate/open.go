package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/hold"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/lock/dblock"
	"github.com/migrate-dev/migrate/lock/etcdlock"
	"github.com/migrate-dev/migrate/lock/redislock"
	"github.com/migrate-dev/migrate/lock/zklock"
	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/notify"
	"github.com/migrate-dev/migrate/outbox"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/postload"
	"github.com/migrate-dev/migrate/records"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/schema"
	"github.com/migrate-dev/migrate/status"
)

// openRunner is the wiring of every command that works a plan: it
// connects to the plan's target and lock service, and to its source unless
// targetOnly (status, resume); builds the lease, fence and cursor over
// them, and the takeover and progress records in the target; and waits
// out a service that is briefly unavailable at start (runner.Ping).
func openRunner(ctx context.Context, plan *plans.Plan, opts runner.Options, targetOnly bool) (*runner.Runner, error) {
	r, _, err := open(ctx, plan, opts, targetOnly)
	return r, err
}

// openStatus opens the reader of a plan's state, on its target and lock
// service; close closes them.
func openStatus(ctx context.Context, plan *plans.Plan, log *slog.Logger) (rd *status.Reader, close func(), err error) {
	r, svc, err := open(ctx, plan, runner.Options{Log: log}, true)
	if err != nil {
		return nil, nil, err
	}
	return &status.Reader{Plan: plan, Target: svc.Target, SQL: svc.TargetSQL, Cursor: svc.Cursor, Fence: svc.Fence,
		Records: svc.Records, Locker: svc.Locker, Steps: postload.Store{Plan: plan.Name, SQL: svc.TargetSQL}, Capture: svc.Capture, Outbox: svc.Outbox}, r.Close, nil
}

// open is openRunner, and the services it opened.
func open(ctx context.Context, plan *plans.Plan, opts runner.Options, targetOnly bool) (*runner.Runner, runner.Services, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var svc runner.Services
	fail := func(err error) (*runner.Runner, runner.Services, error) {
		runner.New(plan, opts, svc).Close()
		return nil, svc, err
	}
	// Opening a pool asks the server its version (Detect): a server
	// briefly unavailable at start is waited out here as Ping waits.
	openDSN := func(dsn plans.DSN, s dialect.Session) (db *sql.DB, d dialect.Dialect, err error) {
		err = dialect.WhileUnavailable(ctx, plan.MaxOutage, opts.Log, "unavailable at start, retrying", func() (err error) {
			db, d, err = openDB(ctx, dsn, s)
			return err
		})
		return db, d, err
	}
	var err error
	if svc.Target, svc.TargetSQL, err = openDSN(plan.Target, dialect.SessionFor(plan.LeaseTTL)); err != nil {
		return fail(fmt.Errorf("target %s: %w", plan.Target, err))
	}
	if !targetOnly || plan.Unresolved() {
		if svc.Source, svc.SourceSQL, err = openDSN(plan.Source, dialect.Session{RawTimes: true}); err != nil {
			return fail(fmt.Errorf("source %s: %w", plan.Source, err))
		}
	}
	if err := resolve(ctx, plan, svc.Source, svc.SourceSQL); err != nil {
		return fail(err)
	}
	targetSQL := svc.TargetSQL
	svc.OpenScan = func(ctx context.Context) (*sql.DB, error) {
		db, _, err := dialect.Open(ctx, targetSQL, plan.Target, dialect.Session{RawTimes: true})
		if err == nil {
			db.SetMaxOpenConns(4) // a chunk hasher, a row comparison, a takeover's check
		}
		return db, err
	}
	b, err := openLock(ctx, plan, opts.Log)
	if err != nil {
		return fail(err)
	}
	svc.Locker, err = lock.New(b, lock.Options{TTL: plan.LeaseTTL, Logger: opts.Log, OnRenewFailure: renewFailed(plan, opts.Metrics)})
	if err != nil {
		_ = b.Close()
		return fail(err)
	}
	svc.LockInTarget = plan.LockInTarget()
	svc.Capture = newCapture(plan)
	svc.Records = records.New(svc.Target, svc.TargetSQL)
	svc.Fence, svc.Cursor = fence.New(svc.TargetSQL), cursor.New(svc.TargetSQL)
	svc.Outbox = outbox.New(svc.TargetSQL)
	if opts.Deliver {
		d, err := notify.NewDeliverer(notify.Config{Plan: plan, Store: svc.Outbox, DB: svc.Target, Leases: svc.Locker,
			Owner: opts.Owner, Log: opts.Log, Metrics: opts.Metrics, Lookup: os.LookupEnv})
		if err != nil {
			return fail(fmt.Errorf("%w: %w", plans.ErrInvalid, err))
		}
		if d != nil {
			svc.Notify = d
		}
	}
	r := runner.New(plan, opts, svc)
	if err := r.Ping(ctx); err != nil {
		r.Close()
		return nil, svc, err
	}
	return r, svc, nil
}

// renewFailed is the lock.Options.OnRenewFailure of a plan's locker: it
// counts a failed lease renewal in the shard's metrics.
func renewFailed(plan *plans.Plan, m *metrics.Metrics) func(base string, _ error) {
	return func(base string, _ error) {
		for _, t := range plan.Tables {
			for i := range t.Shards {
				if s := (fence.Shard{Plan: plan.Name, Table: t.Target, Index: i}); hold.Base(s) == base {
					m.RenewalFailed(s.Table, s.Index)
					return
				}
			}
		}
	}
}

// lockPool is the connections of a lease table (lock/dblock): renewals are
// short and one at a time per shard.
const lockPool = 4

// openLock opens the plan's lock service (plans.Plan.Lock): Redis, etcd or
// ZooKeeper, or a lease table in a database — the target's when the plan
// names none. A database briefly unavailable at start is waited out as
// the others are (runner.Ping).
func openLock(ctx context.Context, plan *plans.Plan, log *slog.Logger) (lock.Backend, error) {
	d := plan.Lock
	switch d.Engine() {
	case plans.Redis:
		rdb, err := redislock.Dial(d.Secret())
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", d, err)
		}
		return redislock.New(rdb, d.String(), log), nil
	case plans.Etcd:
		var b *etcdlock.Backend
		err := dialect.WhileUnavailable(ctx, plan.MaxOutage, log, "unavailable at start, retrying", func() (err error) {
			b, err = etcdlock.Dial(d, log)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", d, err)
		}
		return b, nil
	case plans.ZooKeeper:
		var b *zklock.Backend
		err := dialect.WhileUnavailable(ctx, plan.MaxOutage, log, "unavailable at start, retrying", func() (err error) {
			b, err = zklock.Dial(d, plan.LeaseTTL, log)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", d, err)
		}
		return b, nil
	}
	name := "db " + d.String()
	if d.IsZero() {
		d, name = plan.Target, "db (the target "+plan.Target.String()+")"
	}
	s := dialect.SessionFor(plan.LeaseTTL)
	s.Lease = true
	var db *sql.DB
	var dd dialect.Dialect
	err := dialect.WhileUnavailable(ctx, plan.MaxOutage, log, "unavailable at start, retrying", func() (err error) {
		db, dd, err = openDB(ctx, d, s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	db.SetMaxOpenConns(lockPool)
	return dblock.New(db, dd, name, log), nil
}

// resolve finds the plan's tables and keys in its source when it needs
// them (plans.Plan.Unresolved), waiting out a source briefly unavailable.
func resolve(ctx context.Context, plan *plans.Plan, src *sql.DB, d dialect.Dialect) error {
	if !plan.Unresolved() {
		return nil
	}
	return dialect.WhileUnavailable(ctx, plan.MaxOutage, slog.New(slog.DiscardHandler), "source unavailable, retrying", func() error {
		return schema.Resolve(ctx, src, d, plan)
	})
}

// openDB opens a pool on dsn with the dialect of its engine, refined by
// the server's version.
func openDB(ctx context.Context, dsn plans.DSN, s dialect.Session) (*sql.DB, dialect.Dialect, error) {
	d, err := dialect.For(dsn.Engine())
	if err != nil {
		return nil, nil, err
	}
	return dialect.Open(ctx, d, dsn, s)
}
