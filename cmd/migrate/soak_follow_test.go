package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSoakFollow is the soak under `run --follow`: each round an
// application changes the source table (updates, inserts, deletes) from
// the moment the round's change stream started, the same random faults hit
// the instances (the stream's holder among them), and when every shard is
// done the application stops and `cutover` must catch up and verify. Pass,
// besides TestSoak's conditions: every cutover exits 0 with the target
// equal to the source, and the stream applied exactly the changes the
// application made (a change applied twice after a takeover counts
// twice). `make soak FOLLOW=1` runs it for SOAK.
func TestSoakFollow(t *testing.T) {
	t.Parallel()
	soakTest(t, 30*time.Second, 100000, true)
}

// soakFollowRound is the least time a follow round lasts.
const soakFollowRound = 12 * time.Second

// soakStream is what a follow round measured of its stream.
type soakStream struct {
	made, applied   int64 // row changes: by the application, by the stream
	rate            float64
	catchUp, freeze int64 // the cutover's, ms
	cutoverCode     int
}

// soakApp is the application of a follow round: one connection changing
// the source's big table every few milliseconds, counting the rows its
// committed transactions changed.
type soakApp struct {
	quit    chan struct{}
	done    chan struct{}
	start   time.Time
	changes atomic.Int64
	mu      sync.Mutex
	err     error
}

// startApp waits for the round's stream to start, then starts the
// application.
func (s *soak) startApp(t *testing.T, name, table string) *soakApp {
	t.Helper()
	direct := s.planFor(t, name, table, "", "")
	abandonOnCleanup(t, s.e, direct)
	poll(t, 60*time.Second, "the round's change stream started", func() bool {
		r := runMigrate(t, "status", "-p", direct, "--json")
		var st followStatus
		return r.code == 0 && decodeJSONOK(r.stdout, &st) && st.Stream != nil && st.Stream.StartPos != ""
	})
	if s.nextID == 0 {
		s.nextID = int64(s.rows) + 1
	}
	a := &soakApp{quit: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	t.Cleanup(func() { _, _, _ = a.stop() })
	conn, err := s.e.srcDB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(a.done)
		defer conn.Close()
		tk := time.NewTicker(4 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-a.quit:
				return
			case <-tk.C:
			}
			var q string
			var args []any
			switch k := rand.IntN(10); {
			case k < 4:
				q, args = `UPDATE big SET n = n + 1, payload = $1 WHERE id = $2`, []any{fmt.Sprintf("app %d", rand.IntN(1e9)), 1 + rand.Int64N(int64(s.rows))}
			case k < 7:
				q, args = `INSERT INTO big (id, payload, n) VALUES ($1, $2, $3)`, []any{s.nextID, "new", rand.IntN(1000)}
				s.nextID++
			default:
				q, args = `DELETE FROM big WHERE id = $1`, []any{1 + rand.Int64N(int64(s.rows))}
			}
			res, err := conn.ExecContext(context.Background(), q, args...)
			if err != nil {
				a.mu.Lock()
				a.err = fmt.Errorf("%s %v: %w", q, args, err)
				a.mu.Unlock()
				return
			}
			n, _ := res.RowsAffected()
			a.changes.Add(n)
		}
	}()
	return a
}

// stop stops the application after its statement in flight.
func (a *soakApp) stop() (int64, time.Duration, error) {
	select {
	case <-a.quit:
	default:
		close(a.quit)
	}
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changes.Load(), time.Since(a.start), a.err
}

// copyDone reads the round's checkpoints: every shard done.
func (s *soak) copyDone(t *testing.T, name, table string) bool {
	t.Helper()
	var all, done int64
	err := s.e.dstDB.QueryRowContext(t.Context(), `SELECT count(*), count(*) FILTER (WHERE state = 'done') FROM _migrate_checkpoint WHERE plan = $1 AND tbl = $2`,
		name, table).Scan(&all, &done)
	return err == nil && all == soakShards && done == all
}

// cutover stops the application and cuts the round over: exit 0 (caught
// up and verified), and the stream applied each change once.
func (s *soak) cutover(t *testing.T, name, table string, app *soakApp) *soakStream {
	t.Helper()
	made, took, err := app.stop()
	if err != nil {
		t.Errorf("%s: the application failed: %v", name, err)
	}
	direct := s.planFor(t, name, table, "", "")
	r := runMigrate(t, "cutover", "-p", direct, "--json", "--timeout", "90s")
	ss := &soakStream{made: made, rate: float64(made) / took.Seconds(), cutoverCode: r.code}
	var cj cutoverJSON
	if r.code != 0 || !decodeJSONOK(r.stdout, &cj) {
		t.Errorf("%s: cutover exit %d:\n%s\n%s", name, r.code, r.stdout, tail(r.stderr, 20))
		return ss
	}
	ss.applied, ss.catchUp, ss.freeze = cj.Changes, cj.CatchUpMs, cj.FreezeMs
	if cj.Changes != made {
		t.Errorf("%s: the stream applied %d changes; the application made %d", name, cj.Changes, made)
	}
	return ss
}

// reportStream adds the follow rounds' figures to the report.
func (s *soak) reportStream(b *strings.Builder) {
	fmt.Fprintf(b, "\n| round | application changes | changes/s | applied by the stream | cutover | catch-up ms | write freeze ms |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range s.rounds {
		if st := r.stream; st != nil {
			fmt.Fprintf(b, "| %d | %d | %.0f | %d | exit %d | %d | %d |\n", r.n, st.made, st.rate, st.applied, st.cutoverCode, st.catchUp, st.freeze)
		}
	}
}

func decodeJSONOK(s string, v any) bool { return json.Unmarshal([]byte(s), v) == nil }
