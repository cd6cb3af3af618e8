package bench

import (
	"context"
	"strconv"
	"time"
)

// durableOn turns on PostgreSQL's fsync, synchronous_commit and
// full_page_writes and MariaDB's innodb_flush_log_at_trx_commit=1 (every
// batch's commit durable, as on the reference machine), on the
// whole servers, until durableOff.
func (b *Bench) durableOn(ctx context.Context) error {
	if err := b.svc.Scan(ctx, MY, "", "SELECT @@innodb_flush_log_at_trx_commit", &b.flushBefore); err != nil {
		return err
	}
	b.logf("BENCH_DURABLE: fsync, synchronous_commit, full_page_writes on; innodb_flush_log_at_trx_commit=1 (until the end)")
	b.durable = true
	err := b.svc.Exec(ctx, PG, "", "ALTER SYSTEM SET fsync = on", "ALTER SYSTEM SET synchronous_commit = on",
		"ALTER SYSTEM SET full_page_writes = on", "SELECT pg_reload_conf()")
	if err != nil {
		return err
	}
	if err := b.svc.Exec(ctx, MY, "", "SET GLOBAL innodb_flush_log_at_trx_commit = 1"); err != nil {
		return err
	}
	// the reload reaches every backend
	select {
	case <-time.After(time.Second):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// durableOff puts back the settings durableOn changed.
func (b *Bench) durableOff(ctx context.Context) {
	if !b.durable {
		return
	}
	err := b.svc.Exec(ctx, PG, "", "ALTER SYSTEM RESET fsync", "ALTER SYSTEM RESET synchronous_commit",
		"ALTER SYSTEM RESET full_page_writes", "SELECT pg_reload_conf()")
	if err != nil {
		b.logf("warning: PostgreSQL's durability settings not reset: %v", err)
	}
	flush := strconv.Itoa(b.flushBefore)
	if err := b.svc.Exec(ctx, MY, "", "SET GLOBAL innodb_flush_log_at_trx_commit = "+flush); err != nil {
		b.logf("warning: MariaDB's innodb_flush_log_at_trx_commit not put back to %s: %v", flush, err)
	}
}
