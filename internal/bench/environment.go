package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// report gathers the facts of the header and the table sizes.
func (b *Bench) report(ctx context.Context) (*Report, error) {
	rp := &Report{Config: b.cfg, Results: b.res, Tables: Tables{MYBulk: b.my.bulk}}
	e := &rp.Env
	e.Date, e.BuildRev, e.Cores, e.MemBytes = time.Now(), b.buildRev, runtime.NumCPU(), memTotal()
	rp.Tables.StreamBytes = b.streamBytes
	if sec := b.cfg.Sections; !sec.Alone() || sec.Fleet() {
		if err := b.svc.Scan(ctx, PG, srcDB, "SELECT pg_table_size('orders')", &rp.Tables.PGBytes); err != nil {
			return nil, err
		}
	}
	if err := b.svc.Scan(ctx, PG, "", "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')",
		&e.PGVersion, &e.PGFsync, &e.PGSync); err != nil {
		return nil, err
	}
	e.PGVersion, _, _ = strings.Cut(e.PGVersion, " ")
	if b.cfg.Sections.Alone() {
		e.Redis = b.redisVersion(ctx)
		return rp, nil
	}
	if err := b.svc.Scan(ctx, MY, "", "SELECT data_length FROM information_schema.tables WHERE table_schema = '"+srcDB+"' AND table_name = 'orders'", &rp.Tables.MYBytes); err != nil {
		return nil, err
	}
	if err := b.svc.Scan(ctx, MY, "", "SELECT VERSION(), @@innodb_flush_log_at_trx_commit", &e.MYVersion, &e.MYFlush); err != nil {
		return nil, err
	}
	e.MYVersion, _, _ = strings.Cut(e.MYVersion, "-")
	e.MYFiles = b.my.mode
	if b.cfg.Scale() {
		if err := b.svc.Scan(ctx, PG, scaleDB, "SELECT pg_table_size('orders')", &rp.Tables.ScaleBytes); err != nil {
			rp.Tables.ScaleBytes = 0
		}
	}
	return rp, nil
}

// memTotal is the machine's memory in bytes (/proc/meminfo; 0 unknown).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
