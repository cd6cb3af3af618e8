package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// pgloaderCommand is pgloader's command file, from engine s to dstDB.
func (b *Bench) pgloaderCommand(s Engine) string {
	pg := b.svc.pg
	into := fmt.Sprintf("pgsql://%s:%s@%s/%s", pg.User(), pg.Password(), hostPort(pg, "5432"), dstDB)
	if s == PG {
		return fmt.Sprintf("LOAD DATABASE\n  FROM pgsql://%s:%s@%s/%s\n  INTO %s\n  INCLUDING ONLY TABLE NAMES MATCHING '%s' IN SCHEMA 'public';\n",
			pg.User(), pg.Password(), hostPort(pg, "5432"), srcDB, into, table)
	}
	my := b.svc.my
	return fmt.Sprintf("LOAD DATABASE\n  FROM mysql://%s:%s@%s/%s\n  INTO %s\n  INCLUDING ONLY TABLE NAMES MATCHING '%s'\n  ALTER SCHEMA '%s' RENAME TO 'public';\n",
		my.User(), my.Password(), hostPort(my, "3306"), srcDB, into, table, srcDB)
}

var pgloaderError = regexp.MustCompile(`ERROR|FATAL`)

// pgloader times pgloader from engine s into a fresh PostgreSQL database.
// Its own defaults (4 workers, batches of 25,000 rows), but a 4 GiB Lisp
// heap: with the default 1 GiB it dies of "Heap exhausted" on this table
// in about half the runs (pgloader issue #962). It is tried again in later
// runs only while it has not failed.
func (b *Bench) pgloader(ctx context.Context, s Engine) error {
	key := string(s) + "-pg.pgloader"
	if b.pgloaderBroken || b.res.Failed(key) {
		return nil
	}
	if err := b.needPackage(ctx, "pgloader", "pgloader"); err != nil {
		b.fail(key, "pgloader could not be installed: "+err.Error())
		b.pgloaderBroken = true
		return nil
	}
	if err := b.svc.Fresh(ctx, PG, dstDB); err != nil {
		return err
	}
	cmdFile := filepath.Join(b.work, "pgloader-"+string(s)+".load")
	if err := os.WriteFile(cmdFile, []byte(b.pgloaderCommand(s)), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(b.work, "pgloader-"+string(s)+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	rss := filepath.Join(b.work, "pgloader.rss")
	cmd := underTime(ctx, rss, "pgloader", "--dynamic-space-size", "4096", "--root-dir", filepath.Join(b.work, "pgloader"), cmdFile)
	cmd.Dir, cmd.Stdout, cmd.Stderr = b.work, log, log
	t0 := time.Now()
	err = cmd.Run()
	sec := seconds(t0)
	_ = log.Close()
	var n int
	if cerr := b.svc.Scan(ctx, PG, dstDB, "SELECT count(*) FROM public.orders", &n); cerr != nil {
		n = 0
	}
	if err != nil || n != b.cfg.Rows {
		b.fail(key, fmt.Sprintf("pgloader exit %d, %d rows in the target: %s", max(exitCode(err), 0), n, cut(firstMatch(logPath, pgloaderError), 200)))
		return nil
	}
	b.record(key, sec, readRSS(rss))
	b.logf("  %s: %.3f s", key, sec)
	return nil
}

// firstMatch is the first line of a file that re matches ("" when none).
func firstMatch(path string, re *regexp.Regexp) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			return sc.Text()
		}
	}
	return ""
}
