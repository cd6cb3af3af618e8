package bench

// The change stream (BENCH_ONLY=stream): migrate's applier against
// PostgreSQL's own logical replication, PG->PG, applying the same backlog
// of row changes. Each measurement starts from a source seeded again
// (Config.StreamRows rows of the seeded table, in bench_stream_src) and a
// target holding the same rows (bench_stream_dst); the consumer is stopped
// while the source makes the backlog (streamProc), then timed from its
// start until the target holds the backlog's last transaction (polled
// every 50 ms), and the target must then equal the source. At that moment
// the CPU each consumer used is read from /proc: the subscription's apply
// worker and walsender; migrate's process, and its server processes
// (application_name migrate: its target session, its walsender).
//
//   - native: a publication and a pgoutput slot created at the source
//     beforehand (a CREATE SUBSCRIPTION that creates its slot in the same
//     cluster waits for itself), a subscription in the target seeded alike
//     (create_slot, copy_data and enabled false), timed from ALTER
//     SUBSCRIPTION … ENABLE.
//   - migrate: a plan of the table; `migrate run --follow` copies it and
//     follows the stream until status shows the copy done and the stream
//     following, then is stopped (SIGTERM); after the backlog, a new `run
//     --follow` is timed from its start (setup, lease, replication
//     connection included); `migrate cutover --no-verify` then stops it and
//     drops the slot.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// streamPoll is how often a measurement looks whether the target holds the
// backlog.
const streamPoll = 50 * time.Millisecond

// streamRun is one run of the change stream: the native subscription,
// then migrate. A measurement that fails is recorded as failed; only an
// interruption ends the bench.
func (b *Bench) streamRun(ctx context.Context) error {
	for _, m := range []struct {
		key string
		fn  func(context.Context) error
	}{{"stream.native", b.streamNative}, {"stream.migrate", b.streamMigrate}} {
		b.logf("change stream: %s", m.key)
		if err := m.fn(ctx); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			b.fail(m.key, err.Error())
		}
	}
	return nil
}

// streamStart makes the source (seeded) and an empty target.
func (b *Bench) streamStart(ctx context.Context) error {
	if err := b.streamReset(ctx, true); err != nil {
		return err
	}
	if err := b.streamSeed(ctx, streamSrc); err != nil {
		return err
	}
	if b.streamBytes == 0 {
		if err := b.svc.Scan(ctx, PG, streamSrc, "SELECT pg_table_size('orders')", &b.streamBytes); err != nil {
			return err
		}
	}
	return nil
}

// streamNative measures PostgreSQL's subscription.
func (b *Bench) streamNative(ctx context.Context) error {
	if err := b.streamStart(ctx); err != nil {
		return err
	}
	if err := b.streamSeed(ctx, streamDst); err != nil {
		return err
	}
	name := strings.ReplaceAll(b.tag, "-", "_") + "_sub"
	ident := `"` + name + `"` // [a-z0-9_]
	err := b.svc.Exec(ctx, PG, streamSrc, "CREATE PUBLICATION "+ident+" FOR TABLE orders",
		"SELECT pg_create_logical_replication_slot("+literal(name)+", 'pgoutput')")
	if err != nil {
		return err
	}
	dst, err := b.svc.DB(PG, streamDst)
	if err != nil {
		return err
	}
	// Not through Exec: its errors name the statement, here with a password.
	_, err = dst.ExecContext(ctx, "CREATE SUBSCRIPTION "+ident+" CONNECTION "+literal(b.svc.conninfo(streamSrc))+
		" PUBLICATION "+ident+" WITH (create_slot = false, slot_name = "+literal(name)+", copy_data = false, enabled = false)")
	if err != nil {
		return fmt.Errorf("create the subscription %s in %s: %w", name, streamDst, err)
	}
	if err := b.streamBacklog(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.svc.Exec(ctx, PG, streamDst, "ALTER SUBSCRIPTION "+ident+" ENABLE"); err != nil {
		return err
	}
	if err := b.streamWait(ctx, nil); err != nil {
		return err
	}
	sec := seconds(t0)
	server, err := b.serverCPU(ctx, "(backend_type = 'logical replication worker' AND datname = $1) OR (backend_type = 'walsender' AND datname = $2)", streamDst, streamSrc)
	if err != nil {
		return err
	}
	if err := b.streamSame(ctx); err != nil {
		return err
	}
	b.res.Record("stream.native", Sample{Run: b.run, Seconds: sec, ServerCPU: server})
	b.logf("  stream.native: %.3f s, %.0f changes/s, CPU %.2f s (apply worker and walsender)", sec, float64(b.cfg.StreamBacklog())/sec, server)
	return b.streamReset(ctx, false)
}

// streamMigrate measures migrate's applier.
func (b *Bench) streamMigrate(ctx context.Context) error {
	if err := b.streamStart(ctx); err != nil {
		return err
	}
	name := fmt.Sprintf("%s-stream-%d", b.tag, b.run)
	if err := b.delPlanKeys(ctx, name); err != nil {
		return err
	}
	defer func() { _ = b.delPlanKeys(context.WithoutCancel(ctx), name) }()
	plan := filepath.Join(b.work, name+".yaml")
	spec := "name: " + name + "\nsource: ${MIGRATE_SOURCE}\ntarget: ${MIGRATE_TARGET}\nredis: ${MIGRATE_REDIS}\n" +
		"tables:\n  - name: " + table + "\n    key: [id]\n"
	if err := os.WriteFile(plan, []byte(spec), 0o600); err != nil {
		return err
	}
	env := []string{"MIGRATE_SOURCE=" + b.svc.URL(PG, streamSrc), "MIGRATE_TARGET=" + b.svc.URL(PG, streamDst), "MIGRATE_REDIS=" + b.svc.RedisURL()}

	// The copy, and the stream following: not timed.
	first, err := b.startProc(ctx, name+".copy", env, "run", "-p", plan, "--follow", "--no-progress", "--json")
	if err != nil {
		return err
	}
	defer first.end()
	if err := b.streamFollowing(ctx, first, plan, env); err != nil {
		return err
	}
	if err := first.stop(); err != nil {
		return err
	}
	if err := b.streamBacklog(ctx); err != nil {
		return err
	}

	t0 := time.Now()
	run, err := b.startProc(ctx, name+".follow", env, "run", "-p", plan, "--follow", "--no-progress", "--json")
	if err != nil {
		return err
	}
	defer run.end()
	if err := b.streamWait(ctx, run); err != nil {
		return err
	}
	sec := seconds(t0)
	pid := run.cmd.Process.Pid
	client, _ := procCPU(pid)
	rss := procPeakKB(pid)
	server, err := b.serverCPU(ctx, "application_name = 'migrate' AND datname IN ($1, $2)", streamSrc, streamDst)
	if err != nil {
		return err
	}
	cut := exec.CommandContext(ctx, b.migrate, "cutover", "-p", plan, "--no-verify", "--timeout", "2m", "--json")
	cut.Env = append(os.Environ(), env...)
	if err := runTool(cut); err != nil {
		return fmt.Errorf("migrate cutover: %w", err)
	}
	if err := run.wait(time.Minute); err != nil {
		return fmt.Errorf("migrate run --follow after the cutover: %w", err)
	}
	if err := b.streamSame(ctx); err != nil {
		return err
	}
	b.res.Record("stream.migrate", Sample{Run: b.run, Seconds: sec, RSSKB: rss, ClientCPU: client, ServerCPU: server})
	b.logf("  stream.migrate: %.3f s, %.0f changes/s, CPU %.2f s in migrate and %.2f s in the server, peak RSS %d MB",
		sec, float64(b.cfg.StreamBacklog())/sec, client, server, rss/1024)
	return b.streamReset(ctx, false)
}

// streamWait waits until the target holds the backlog, failing when p (if
// any) exits first or the backlog is not applied at 1,000 changes/s.
func (b *Bench) streamWait(ctx context.Context, p *proc) error {
	limit := time.Minute + time.Duration(b.cfg.StreamBacklog())*time.Millisecond
	deadline := time.Now().Add(limit)
	for {
		ok, err := b.streamHolds(ctx)
		if err != nil || ok {
			return err
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited before it applied the backlog: %s", p.name, p.why())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the backlog was not applied within %s", limit)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(streamPoll):
		}
	}
}

// streamFollowing waits until `migrate status` shows the copy done (every
// shard and the post-load phase) and the stream following.
func (b *Bench) streamFollowing(ctx context.Context, p *proc, plan string, env []string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		cmd := exec.CommandContext(ctx, b.migrate, "status", "-p", plan, "--json")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		var st struct {
			Totals []struct {
				Shards     int `json:"shards"`
				ShardsDone int `json:"shards_done"`
			} `json:"totals"`
			PostLoad *struct {
				State string `json:"state"`
			} `json:"post_load"`
			Stream *struct {
				State string `json:"state"`
			} `json:"stream"`
		}
		if err == nil && json.Unmarshal(out, &st) == nil && len(st.Totals) > 0 && st.Stream != nil && st.Stream.State == "following" &&
			(st.PostLoad == nil || st.PostLoad.State == "done") {
			done := true
			for _, t := range st.Totals {
				done = done && t.Shards > 0 && t.ShardsDone == t.Shards
			}
			if done {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s exited before the copy was done: %s", p.name, p.why())
		}
		if time.Now().After(deadline) {
			return errors.New("the copy was not done and the stream following within 10 min")
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// proc is a migrate process of the stream section, its stdout and stderr
// in NAME.json and NAME.log of the work folder.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit, once done is closed
}

// startProc starts bench's migrate with args, DSNs in its environment, in
// a process group of its own.
func (b *Bench) startProc(ctx context.Context, name string, env []string, args ...string) (*proc, error) {
	p := &proc{name: "migrate " + args[0] + " (" + name + ")", log: filepath.Join(b.work, name+".log"), done: make(chan struct{})}
	out, err := os.Create(filepath.Join(b.work, name+".json"))
	if err != nil {
		return nil, err
	}
	log, err := os.Create(p.log)
	if err != nil {
		_ = out.Close()
		return nil, err
	}
	p.cmd = exec.CommandContext(ctx, b.migrate, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		_, _ = out.Close(), log.Close()
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		_, _ = out.Close(), log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// why is how the process ended: its exit code and the last line of its log.
func (p *proc) why() string {
	return fmt.Sprintf("exit %d: %s", exitCode(p.err), lastLineOf(p.log))
}

// wait waits up to d for the process to exit; its error is the exit's.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s", p.why())
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s still runs after %s", p.name, d)
	}
}

// stop asks the process to end (SIGTERM: it commits what it applies and
// releases its leases) and waits up to a minute for it.
func (p *proc) stop() error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("%s did not exit within a minute of SIGTERM", p.name)
	}
}

// end kills the process (its group) if it still runs, and waits for it.
func (p *proc) end() {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}
