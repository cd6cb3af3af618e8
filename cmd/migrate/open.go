package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/lock"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/records"
	"github.com/migrate-dev/migrate/runner"
	"github.com/migrate-dev/migrate/schema"
)

// openRunner is the wiring of every command that works a plan: it
// connects to the plan's target and Redis, and to its source unless
// targetOnly (status, resume); builds the lease, fence and cursor over
// them, and the takeover and progress records in Redis; and waits out a service that is briefly unavailable at start
// (runner.Ping).
func openRunner(ctx context.Context, plan *plans.Plan, opts runner.Options, targetOnly bool) (*runner.Runner, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var svc runner.Services
	fail := func(err error) (*runner.Runner, error) {
		runner.New(plan, opts, svc).Close()
		return nil, err
	}
	// Opening a MySQL pool asks the server its version (Detect): a server
	// briefly unavailable at start is waited out here as Ping waits.
	open := func(dsn plans.DSN, s dialect.Session) (db *sql.DB, d dialect.Dialect, err error) {
		err = runner.WhileUnavailable(ctx, plan.MaxOutage, opts.Log, "unavailable at start, retrying", func() (err error) {
			db, d, err = openDB(ctx, dsn, s)
			return err
		})
		return db, d, err
	}
	var err error
	if svc.Target, svc.TargetSQL, err = open(plan.Target, dialect.SessionFor(plan.LeaseTTL)); err != nil {
		return fail(fmt.Errorf("target %s: %w", plan.Target, err))
	}
	if !targetOnly || plan.Unresolved() {
		if svc.Source, svc.SourceSQL, err = open(plan.Source, dialect.Session{RawTimes: true}); err != nil {
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
	if svc.Redis, err = lock.Dial(plan.Redis.Secret()); err != nil {
		return fail(fmt.Errorf("redis DSN %s: %w", plan.Redis, err))
	}
	svc.Locker, err = lock.New(svc.Redis, lock.Options{TTL: plan.LeaseTTL, Logger: opts.Log, OnRenewFailure: runner.RenewFailed(plan, opts.Metrics)})
	if err != nil {
		return fail(err)
	}
	svc.Records = records.New(svc.Redis)
	svc.Fence, svc.Cursor = fence.New(svc.TargetSQL), cursor.New(svc.TargetSQL)
	r := runner.New(plan, opts, svc)
	if err := r.Ping(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// resolve finds the plan's tables and keys in its source when it needs
// them (plans.Plan.Unresolved), waiting out a source briefly unavailable.
func resolve(ctx context.Context, plan *plans.Plan, src *sql.DB, d dialect.Dialect) error {
	if !plan.Unresolved() {
		return nil
	}
	return runner.WhileUnavailable(ctx, plan.MaxOutage, slog.New(slog.DiscardHandler), "source unavailable, retrying", func() error {
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
