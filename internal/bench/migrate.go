package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// runResult is what the bench reads of `migrate run --json` (SPEC §4).
type runResult struct {
	RowsWritten  int64  `json:"rows_written"`
	ReplayedRows int64  `json:"replayed_rows"`
	Error        string `json:"error"`
	Shards       []struct {
		Token int64 `json:"token"`
	} `json:"shards"`
}

// readRunResult reads the JSON result a run left in path.
func readRunResult(path string) (runResult, error) {
	var r runResult
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// migrateCmd is bench's copy of migrate with args, DSNs in its environment
// (not argv), under GNU time, its stdout, stderr and peak RSS into
// NAME.json, NAME.log and NAME.rss of the work folder (the files are
// closed by the returned function).
func (b *Bench) migrateCmd(ctx context.Context, name string, env []string, args ...string) (*exec.Cmd, func(), error) {
	out, err := os.Create(filepath.Join(b.work, name+".json"))
	if err != nil {
		return nil, nil, err
	}
	log, err := os.Create(filepath.Join(b.work, name+".log"))
	if err != nil {
		_ = out.Close()
		return nil, nil, err
	}
	cmd := underTime(ctx, filepath.Join(b.work, name+".rss"), b.migrate, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, log
	return cmd, func() { _, _ = out.Close(), log.Close() }, nil
}

// migrateRun is one timed `migrate run` of plan name, plan-less, from
// engine s (database srcDBName, of rows rows) to engine d, with its peak
// RSS; a failure is recorded under key and returns false.
func (b *Bench) migrateRun(ctx context.Context, key, name string, s, d Engine, srcDBName string, rows int) bool {
	env := []string{"MIGRATE_SOURCE=" + b.svc.URL(s, srcDBName), "MIGRATE_TARGET=" + b.svc.URL(d, dstDB), "MIGRATE_REDIS=" + b.svc.RedisURL()}
	cmd, done, err := b.migrateCmd(ctx, name, env, "run", "--no-progress", "--json", "--no-verify",
		"--name", name, "--table", table, "--key", "id")
	if err != nil {
		b.fail(key, err.Error())
		return false
	}
	t0 := time.Now()
	err = cmd.Run()
	sec := seconds(t0)
	done()
	res, jerr := readRunResult(filepath.Join(b.work, name+".json"))
	if err != nil {
		why := "error: " + res.Error
		if jerr != nil || res.Error == "" {
			why = lastLineOf(filepath.Join(b.work, name+".log"))
		}
		b.fail(key, fmt.Sprintf("migrate run exit %d: %s", exitCode(err), why))
		return false
	}
	if jerr != nil {
		b.fail(key, "migrate run printed no JSON result: "+jerr.Error())
		return false
	}
	if res.RowsWritten != int64(rows) {
		b.fail(key, fmt.Sprintf("wrote %d rows, not %d", res.RowsWritten, rows))
		return false
	}
	rss := readRSS(filepath.Join(b.work, name+".rss"))
	b.record(key, sec, rss)
	token := int64(0)
	if len(res.Shards) > 0 {
		token = res.Shards[0].Token
	}
	b.logf("  %s: %.3f s, peak RSS %d MB, token %d, replayed %d", key, sec, rss/1024, token, res.ReplayedRows)
	return true
}

// direction copies s->d into a fresh database, then replays it and
// verifies it (as the sections ask).
func (b *Bench) direction(ctx context.Context, s, d Engine) error {
	dir := string(s) + "-" + string(d)
	name := fmt.Sprintf("%s-%s%s-%d", b.tag, s, d, b.run)
	if err := b.svc.Fresh(ctx, d, dstDB); err != nil {
		return err
	}
	if err := b.delPlanKeys(ctx, name); err != nil {
		return err
	}
	if !b.migrateRun(ctx, dir+".run", name, s, d, srcDB, b.cfg.Rows) {
		return nil
	}
	if b.cfg.Sections.Extra("replay") {
		if err := b.replay(ctx, dir, name, s, d); err != nil {
			return err
		}
	}
	if s == d && b.cfg.Sections.Extra("verify") {
		if err := b.hashBoth(ctx, s); err != nil {
			return err
		}
		b.verify(ctx, dir, name, s, d)
	}
	return b.delPlanKeys(ctx, name)
}

// replay runs a new plan whose token counter starts at the first plan's:
// its token is higher, so it rewrites every row the first one wrote.
func (b *Bench) replay(ctx context.Context, dir, name string, s, d Engine) error {
	replay := name + "-replay"
	if err := b.delPlanKeys(ctx, replay); err != nil {
		return err
	}
	if err := b.copyTokens(ctx, name, replay); err != nil {
		return err
	}
	if err := b.svc.Checkpoint(ctx); err != nil {
		return err
	}
	b.migrateRun(ctx, dir+".replay", replay, s, d, srcDB, b.cfg.Rows)
	return b.delPlanKeys(ctx, replay)
}

// verify times `migrate verify` of the copy of plan name.
func (b *Bench) verify(ctx context.Context, dir, name string, s, d Engine) {
	key := dir + ".verify"
	env := []string{"MIGRATE_SOURCE=" + b.svc.URL(s, srcDB), "MIGRATE_TARGET=" + b.svc.URL(d, dstDB), "MIGRATE_REDIS=" + b.svc.RedisURL()}
	cmd, done, err := b.migrateCmd(ctx, name+".verify", env, "verify", "--no-progress", "--json",
		"--name", name, "--table", table, "--key", "id")
	if err != nil {
		b.fail(key, err.Error())
		return
	}
	t0 := time.Now()
	err = cmd.Run()
	sec := seconds(t0)
	done()
	if err != nil {
		out, _ := os.ReadFile(filepath.Join(b.work, name+".verify.json"))
		if len(out) > 300 {
			out = out[len(out)-300:]
		}
		b.fail(key, fmt.Sprintf("migrate verify exit %d (3: differences): %s%s", exitCode(err), out,
			lastLineOf(filepath.Join(b.work, name+".verify.log"))))
		return
	}
	b.record(key, sec, 0)
	b.logf("  %s: %.3f s", key, sec)
}
