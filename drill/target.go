package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/migrate-dev/migrate/cursor"
	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/fence"
	"github.com/migrate-dev/migrate/internal/netfault"
	"github.com/migrate-dev/migrate/plans"
)

// ErrNotFresh means the plan's target or lock service already holds state
// of the plan (rows, checkpoints, leases): a drill needs a fresh start,
// which --reset makes.
var ErrNotFresh = errors.New("drill: the plan's target is not fresh")

// targetSQL is what the drill needs from the target's dialect.
type targetSQL interface {
	TableExists(table []string) (string, []any)
	CountRows(table []string) string
	DrillCount(table, key []string, fence string, after bool, r dialect.Range) dialect.Query
	DropTable(table []string) string
	DrillForget() []string
	Helpers() []string
}

// target is the drill's own connection to the plan's target database.
type target struct {
	db     *sql.DB
	sql    targetSQL
	cursor *cursor.Store
	plan   *plans.Plan
}

func openTarget(ctx context.Context, plan *plans.Plan) (*target, error) {
	d, err := dialect.For(plan.Target.Engine())
	if err != nil {
		return nil, err
	}
	db, d, err := dialect.Open(ctx, d, plan.Target, dialect.Session{})
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", plan.Target, err)
	}
	return &target{db: db, sql: d, cursor: cursor.New(d), plan: plan}, nil
}

func (t *target) close() { _ = t.db.Close() }

func (t *target) exists(ctx context.Context, table []string) (bool, error) {
	q, args := t.sql.TableExists(table)
	var ok bool
	err := t.db.QueryRowContext(ctx, q, args...).Scan(&ok)
	return ok, err
}

// dirt lists what the target holds of the plan: rows in its target tables,
// checkpoint rows.
func (t *target) dirt(ctx context.Context) ([]string, error) {
	var out []string
	for _, tb := range t.plan.Tables {
		ok, err := t.exists(ctx, tb.TargetIdent())
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", t.plan.Target, err)
		}
		if !ok {
			continue
		}
		var n int64
		if err := t.db.QueryRowContext(ctx, t.sql.CountRows(tb.TargetIdent())).Scan(&n); err != nil {
			return nil, fmt.Errorf("target table %s: %w", tb.Target, err)
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("target table %s holds %d rows", tb.Target, n))
		}
	}
	return out, nil
}

// reset drops the plan's target tables and deletes its checkpoint,
// watermark and post-load step rows.
func (t *target) reset(ctx context.Context) error {
	for _, tb := range t.plan.Tables {
		if _, err := t.db.ExecContext(ctx, t.sql.DropTable(tb.TargetIdent())); err != nil {
			return fmt.Errorf("drop target table %s: %w", tb.Target, err)
		}
	}
	ok, err := t.exists(ctx, []string{dialect.CheckpointTable})
	if err != nil || !ok {
		return err
	}
	// The post-load steps' table is forgotten in too (made first where an
	// older version set the target up without it).
	for _, q := range t.sql.Helpers() {
		if _, err := t.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("forget plan %s: %w", t.plan.Name, err)
		}
	}
	for _, q := range t.sql.DrillForget() {
		if _, err := t.db.ExecContext(ctx, q, t.plan.Name); err != nil {
			return fmt.Errorf("forget plan %s: %w", t.plan.Name, err)
		}
	}
	return nil
}

// count returns the rows of a shard of table in range r (key after the key
// given, unless after is nil) and how many of them hold a token below tok.
func (t *target) count(ctx context.Context, tb plans.Table, r dialect.Range, after []any, tok int64) (rows, older int64, err error) {
	q := t.sql.DrillCount(tb.TargetIdent(), tb.Key, t.plan.FenceColumn, after != nil, r)
	values := make([]any, len(tb.Key), len(tb.Key)+3)
	copy(values, after)
	values = append(values, r.Lo, r.Hi, tok)
	err = t.db.QueryRowContext(ctx, q.SQL, q.Bind(values)...).Scan(&rows, &older)
	return rows, older, err
}

// bounds returns the key range of a shard from its checkpoint.
func (t *target) bounds(ctx context.Context, tb plans.Table, shard int) (dialect.Range, error) {
	cp, err := t.cursor.Read(ctx, t.db, fence.Shard{Plan: t.plan.Name, Table: tb.Target, Index: shard})
	if err != nil {
		return dialect.Range{}, err
	}
	return dialect.Range{Lo: cp.Lo, Hi: cp.Hi}, nil
}

// proxies starts the holder's proxies to the target and to the lock
// service (none when the leases are kept in the target: the target's
// proxy cuts both), and returns the standbys' and the holder's
// environments.
func (d *drill) proxies() (env, holderEnv []string, err error) {
	up := func(dsn plans.DSN, name string) (*netfault.Proxy, plans.DSN, error) {
		addr, err := hostPort(dsn)
		if err != nil {
			return nil, plans.DSN{}, err
		}
		p, err := netfault.NewProxy(name, addr)
		if err != nil {
			return nil, plans.DSN{}, err
		}
		via, err := redirect(dsn, p.Addr())
		return p, via, err
	}
	var tdsn, ldsn plans.DSN
	if d.tproxy, tdsn, err = up(d.plan.Target, "target"); err != nil {
		return nil, nil, err
	}
	if !d.plan.LockInTarget() {
		if d.lproxy, ldsn, err = up(d.plan.Lock, "lock"); err != nil {
			return nil, nil, err
		}
	}
	if d.o.HolderLatency > 0 {
		if err := d.tproxy.Slow(d.o.HolderLatency); err != nil {
			return nil, nil, err
		}
	}
	vars := func(target, lock plans.DSN) []string {
		l := plans.LockDB
		if !lock.IsZero() {
			l = lock.Secret()
		}
		// MIGRATE_REDIS emptied: the drill's own environment may set it,
		// and --lock and --redis together are refused.
		return []string{"MIGRATE_SOURCE=" + d.plan.Source.Secret(), "MIGRATE_TARGET=" + target.Secret(), "MIGRATE_LOCK=" + l, "MIGRATE_REDIS="}
	}
	return vars(d.plan.Target, d.plan.Lock), vars(tdsn, ldsn), nil
}

// hostPort is the TCP address of d, with the engine's default port.
func hostPort(d plans.DSN) (string, error) {
	if hosts := d.Hosts(); len(hosts) > 0 {
		if len(hosts) > 1 {
			return "", fmt.Errorf("drill: %s lists %d hosts; the drill proxies one address: give the plan a one-member %s for the drill", d, len(hosts), d.Engine())
		}
		return hosts[0], nil
	}
	if d.Host() == "" || strings.HasPrefix(d.Host(), "/") {
		return "", fmt.Errorf("drill: %s is not a TCP address; the drill proxies TCP connections", d)
	}
	port := d.Port()
	if port == "" {
		port = map[plans.Engine]string{plans.Postgres: "5432", plans.MySQL: "3306", plans.Redis: "6379"}[d.Engine()]
	}
	return net.JoinHostPort(d.Host(), port), nil
}

// redirect returns d pointing at addr (host:port) instead of its own host.
// Its errors never quote d's secret.
func redirect(d plans.DSN, addr string) (plans.DSN, error) {
	s := d.Secret()
	if d.Native() {
		cfg, err := mysql.ParseDSN(s)
		if err != nil || cfg.Net != "tcp" {
			return plans.DSN{}, fmt.Errorf("drill: cannot proxy %s: it needs a tcp(host:port) address", d)
		}
		cfg.Addr = addr
		s = cfg.FormatDSN()
	} else {
		u, err := url.Parse(s)
		if err != nil || u.Query().Has("host") {
			return plans.DSN{}, fmt.Errorf("drill: cannot proxy %s: give the host in the URL's authority", d)
		}
		u.Host = addr
		s = u.String()
	}
	return plans.ParseDSN(s)
}
