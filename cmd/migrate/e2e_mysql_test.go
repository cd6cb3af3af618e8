package main_test

// End-to-end tests of MySQL/MariaDB behaviour: keys MySQL cannot page over,
// dates with zero parts, tinyint(1) values that are not booleans, extra
// unique indexes on a target, a DSN asking for found-rows counts, and a
// standby meeting a locked checkpoint row. Each test has fresh databases and
// a unique plan name (env); targets are checked by SQL.

import (
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/migrate-dev/migrate/internal/testsvc"
)

// targetTables lists every table of e's target database.
func targetTables(t *testing.T, e *env) []string {
	t.Helper()
	q := `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`
	if e.dst == mysqlEngine {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1`
	}
	return queryStrings(t, e.dstDB, q)
}

// queryStrings returns every row of q as its columns' texts joined by "|",
// NULL spelled out.
func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = "NULL"
			if v.Valid {
				parts[i] = v.String
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// nativeDSN turns a mysql:// URL into the driver's native form with params.
func nativeDSN(t *testing.T, u, params string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := p.User.Password()
	return p.User.Username() + ":" + pw + "@tcp(" + p.Host + ")" + p.Path + "?" + params
}

// TestMySQL_EnumKeyRefused: MySQL sorts an ENUM by its index but compares it
// as text, so a keyset over it would skip rows: the plan is refused (exit 2)
// before anything is created in the target.
func TestMySQL_EnumKeyRefused(t *testing.T) {
	t.Parallel()
	for _, dst := range []*engine{pgEngine, mysqlEngine} {
		t.Run("to_"+dst.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, mysqlEngine, dst)
			exec1(t, e.srcDB, "CREATE TABLE ekeys (st enum('new','active','done') NOT NULL, id bigint NOT NULL, v int, PRIMARY KEY (st, id))")
			exec1(t, e.srcDB, "INSERT INTO ekeys VALUES ('done', 1, 1), ('new', 2, 2), ('active', 3, 3), ('new', 4, 4)")
			r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: "ekeys", key: []string{"st", "id"}}))
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, "ekeys.st") || !strings.Contains(r.stderr, "enum") {
				t.Errorf("stderr does not name ekeys.st and enum:\n%s", r)
			}
			if tabs := targetTables(t, e); len(tabs) != 0 {
				t.Errorf("the refused plan left tables %v in the target", tabs)
			}
		})
	}
}

// TestMySQL_ZeroPartDates: dates with a zero year, month or day have no
// PostgreSQL value (the shard halts before the batch holding one), and go to
// a MySQL target exactly as they are, never shifted to a real date. zparts
// fails first on a DATE, zdt on a DATETIME(6).
func TestMySQL_ZeroPartDates(t *testing.T) {
	t.Parallel()
	seed := []string{"SET SESSION sql_mode = ''", // zero parts allowed
		"CREATE TABLE zparts (id bigint NOT NULL PRIMARY KEY, born date, seen_at datetime(6))",
		`INSERT INTO zparts VALUES
 (1, '2024-01-10', '2024-01-10 10:00:00.000001'), (2, '2023-12-31', NULL),
 (3, '2020-02-29', '2020-02-29 23:59:59.999999'), (4, NULL, '2024-03-01 00:00:00'),
 (5, '2024-00-15', '2024-01-01 00:00:00'), (6, '2024-02-00', NULL),
 (7, '0000-00-00', '0000-00-00 00:00:00'), (8, '2024-05-06', '2024-02-00 10:00:00.123456')`,
		"CREATE TABLE zdt (id bigint NOT NULL PRIMARY KEY, seen_at datetime(6))",
		"INSERT INTO zdt VALUES (1, '2024-01-01 00:00:00.5'), (2, '2024-02-00 10:00:00.123456'), (3, '2024-03-03 03:03:03')"}
	for _, dst := range []*engine{pgEngine, mysqlEngine} {
		t.Run("to_"+dst.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, mysqlEngine, dst)
			e.batchSize, e.maxRetries = 2, 1
			conn, err := e.srcDB.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range seed {
				if _, err := conn.ExecContext(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			_ = conn.Close()
			r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: "zparts", key: []string{"id"}}, planTable{name: "zdt", key: []string{"id"}}))
			if dst == mysqlEngine {
				wantCode(t, r, 0)
				for _, q := range []string{"SELECT id, CAST(born AS CHAR), CAST(seen_at AS CHAR) FROM zparts ORDER BY id",
					"SELECT id, CAST(seen_at AS CHAR) FROM zdt ORDER BY id"} {
					src, got := queryStrings(t, e.srcDB, q), queryStrings(t, e.dstDB, q)
					if !slices.Equal(src, got) || len(src) < 3 {
						t.Errorf("%s: target differs from the source:\nsource %q\ntarget %q", q, src, got)
					}
				}
				return
			}
			// zparts: batches {1,2} and {3,4} are committed, {5,6} holds the
			// first bad value and none of it may be. zdt: {1,2} is refused.
			wantCode(t, r, 5)
			for _, s := range []string{`"born"`, "2024-00-15", `"seen_at"`, "2024-02-00 10:00:00.123456"} {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr does not name %s:\n%s", s, r)
				}
			}
			for _, c := range []struct {
				tbl  string
				done int64
			}{{"zparts", 4}, {"zdt", 0}} {
				cp, ok := e.checkpointOf(t, c.tbl, 0)
				n := queryInt(t, e.dstDB, "SELECT count(*) FROM "+c.tbl)
				above := queryInt(t, e.dstDB, "SELECT count(*) FROM "+c.tbl+" WHERE id > $1", c.done)
				if !ok || n != c.done || above != 0 || cp.rowsDone != c.done || cp.state != "halted" {
					t.Errorf("%s: target holds %d rows (%d past id %d), checkpoint %+v (found %v); want ids 1-%d only, %d done, halted",
						c.tbl, n, above, c.done, cp, ok, c.done, c.done)
				}
			}
		})
	}
}

// TestMySQL_TinyintNotBoolean: a tinyint(1) holding 2 is no boolean; into
// PostgreSQL the shard halts and names the types override, which then works.
func TestMySQL_TinyintNotBoolean(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mysqlEngine, pgEngine)
	e.maxRetries = 1
	exec1(t, e.srcDB, "CREATE TABLE tiny (id bigint NOT NULL PRIMARY KEY, prio tinyint(1) NOT NULL)")
	exec1(t, e.srcDB, "INSERT INTO tiny VALUES (1, 0), (2, 1), (3, 2)")
	r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: "tiny", key: []string{"id"}}))
	wantCode(t, r, 5)
	if !strings.Contains(r.stderr, "prio") || !strings.Contains(r.stderr, "types:") || !strings.Contains(r.stderr, "smallint") {
		t.Errorf("stderr does not name the column prio and suggest types: {prio: \"smallint\"}:\n%s", r)
	}

	e.name = testsvc.Prefix(t) // a fresh target and plan name
	e.dstURL, e.dstDB = e.dst.newDB(t)
	r = runMigrate(t, "run", "-p", e.plan(t, planTable{name: "tiny", key: []string{"id"}, types: map[string]string{"prio": "smallint"}}))
	wantCode(t, r, 0)
	if got := queryStrings(t, e.dstDB, "SELECT id, prio FROM tiny ORDER BY id"); !slices.Equal(got, []string{"1|0", "2|1", "3|2"}) {
		t.Errorf("target rows %q, want 1|0 2|1 3|2", got)
	}
	e.assertTypes(t, "tiny", "id bigint, prio smallint, _fence bigint")
}

// TestMySQL_ExtraUniqueIndexRefused: MySQL's ON DUPLICATE KEY UPDATE fires
// on any unique index, so a target with one besides the key is refused
// (exit 2) and left as it was.
func TestMySQL_ExtraUniqueIndexRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgEngine, mysqlEngine)
	exec1(t, e.srcDB, "CREATE TABLE users (id bigint PRIMARY KEY, email varchar(100) NOT NULL, n integer)")
	exec1(t, e.srcDB, "INSERT INTO users SELECT g, 'user' || g || '@example.com', g FROM generate_series(1, 50) g")
	exec1(t, e.dstDB, "CREATE TABLE users (id bigint NOT NULL, email varchar(100) NOT NULL, n int, _fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (id), UNIQUE KEY users_email (email))")
	var name, before, after string
	if err := e.dstDB.QueryRowContext(t.Context(), "SHOW CREATE TABLE users").Scan(&name, &before); err != nil {
		t.Fatal(err)
	}
	r := runMigrate(t, "run", "-p", e.plan(t, planTable{name: "users", key: []string{"id"}}))
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "unique index") || !strings.Contains(r.stderr, "email") {
		t.Errorf("stderr does not mention the unique index on email:\n%s", r)
	}
	if err := e.dstDB.QueryRowContext(t.Context(), "SHOW CREATE TABLE users").Scan(&name, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the target table changed:\nbefore %s\nafter  %s", before, after)
	}
	if n := queryInt(t, e.dstDB, "SELECT count(*) FROM users"); n != 0 {
		t.Errorf("the target table holds %d rows, want none", n)
	}
	if tabs := targetTables(t, e); !slices.Equal(tabs, []string{"users"}) {
		t.Errorf("target tables %v, want only users (no helper tables)", tabs)
	}
}

// TestMySQL_ClientFoundRowsL4: the target DSN asks for found-rows counts, in
// which a claim that changed nothing would look granted. Redis loses its
// counter after a SIGKILL; the next run's claim (a token not above the
// watermark) must still be refused, the counter raised and the copy finished.
func TestMySQL_ClientFoundRowsL4(t *testing.T) {
	t.Parallel()
	const n = 60000
	rs := testsvc.StartRedis(t, false)
	e := newEnv(t, pgEngine, mysqlEngine)
	e.redisURL, e.leaseTTL, e.batchSize = rs.URL, "2s", 1000
	tb := bigTable(n)
	tb.create(t, e.src, e.srcDB)
	e.dstURL = nativeDSN(t, e.dstURL, "clientFoundRows=true")
	// The copy waits at the first row of the batch past n/2: the kill finds
	// it mid-run, however fast it copies.
	g := e.gateTable(t, tb, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})

	first := startMigrate(t, "run", "-p", plan, "--json", "--instance", "before")
	g.waitHeld(t, first, 1)
	if k := first.kill(t); k.code != -1 {
		t.Fatalf("the first run was not killed by the signal: %s", k)
	}
	g.drop(t) // its batch at the gate ends with its connection, as a killed client's does
	g.openAll(t)
	w, _ := e.fence(t, tb.name, 0)
	before, _ := e.checkpointOf(t, tb.name, 0)
	rs.Restart() // no persistence: the lease and the counter are gone

	r := runMigrate(t, "run", "-p", plan, "--json", "--instance", "after")
	wantCode(t, r, 0)
	var rep runReport
	decodeJSON(t, r, &rep)
	tok, owner := e.fence(t, tb.name, 0)
	t.Logf("killed at %d rows; watermark %d before the Redis restart, %d (%s) after; %v", before.rowsDone, w, tok, owner, r.elapsed.Round(time.Millisecond))
	if tok <= w || !strings.HasPrefix(owner, "after-") {
		t.Errorf("watermark %d of %q, want above %d, by the second run", tok, owner, w)
	}
	if !strings.Contains(r.stderr, "raising its tokens") {
		t.Errorf("the second run never saw its claim refused (no L4 raise):\n%s", r)
	}
	if rep.StaleRejections != 0 || rep.RowsWritten != n-before.rowsDone {
		t.Errorf("stale_rejections %d rows_written %d, want 0 and %d", rep.StaleRejections, rep.RowsWritten, n-before.rowsDone)
	}
	if cp, _ := e.checkpointOf(t, tb.name, 0); cp.state != "done" || cp.rowsDone != n || cp.token != tok {
		t.Errorf("checkpoint %+v, want done, %d rows, token %d", cp, n, tok)
	}
	assertSameDump(t, e, tb, n)
}

// TestMySQL_LockedCheckpointDoesNotKillStandby: another session holds the
// checkpoint row locked (longer than the instances' lock wait timeout)
// while a second instance starts as a standby: the holder's batches wait or
// retry, the standby keeps waiting, and both finish with exit 0.
func TestMySQL_LockedCheckpointDoesNotKillStandby(t *testing.T) {
	t.Parallel()
	const n = 100000
	e := newEnv(t, pgEngine, mysqlEngine)
	e.leaseTTL, e.batchSize = "4s", 500
	tb := bigTable(n)
	tb.create(t, e.src, e.srcDB)
	// The holder waits at the first row of the batch past n/2 while the
	// checkpoint row is locked: it is mid-run then, however fast it copies.
	// The gate opens once the row is locked: its next cursor advance waits.
	g := e.gateTable(t, tb, fmt.Sprintf("NEW.id > %d", n/2))
	plan := e.plan(t, planTable{name: tb.name, key: tb.key})

	a := startMigrate(t, "run", "-p", plan, "--json", "--instance", "a")
	g.waitHeld(t, a, 1)

	tx, err := e.dstDB.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var locked int64
	if err := tx.QueryRowContext(t.Context(), "SELECT rows_done FROM _migrate_checkpoint WHERE plan = ? AND tbl = ? AND shard = 0 FOR UPDATE",
		e.name, tb.name).Scan(&locked); err != nil {
		t.Fatal(err)
	}
	lockedAt := time.Now()
	g.openAll(t)
	b := startMigrate(t, "run", "-p", plan, "--json", "--instance", "b")
	poll(t, 30*time.Second, "the second instance to become a standby", func() bool {
		select {
		case <-b.done:
			t.Fatalf("the second instance exited while the checkpoint was locked:\n%s", b.wait(t))
		default:
		}
		return strings.Contains(b.stderr.String(), "standby")
	})
	// Hold the row past the instances' lock wait timeout (lease_ttl/2 = 2s),
	// failing at once if either instance exits meanwhile.
	select {
	case <-a.done:
		t.Fatalf("the holder exited while the checkpoint was locked:\n%s", a.wait(t))
	case <-b.done:
		t.Fatalf("the standby exited while the checkpoint was locked:\n%s", b.wait(t))
	case <-time.After(3*time.Second - time.Since(lockedAt)):
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint row locked at %d rows for %v", locked, time.Since(lockedAt).Round(time.Millisecond))

	var total int64
	for _, p := range []*proc{a, b} {
		r := p.wait(t)
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		total += rep.RowsWritten
		t.Logf("instance %s: exit 0 after %v, %d rows written, %d lock-wait warnings", p.cmd.Args[len(p.cmd.Args)-1],
			r.elapsed.Round(time.Millisecond), rep.RowsWritten, strings.Count(r.stderr, "Lock wait timeout"))
	}
	if total != n {
		t.Errorf("the instances wrote %d rows together, want %d", total, n)
	}
	assertSameDump(t, e, tb, n)
}

// TestMySQL_CaseInsensitiveKey: a MySQL -> MySQL copy of a table whose
// primary key is case-insensitive (utf8mb4_general_ci) and holds keys in
// mixed case ('a0', 'B1', 'c2': the collation's order is not the bytes'),
// in three shards of four-row batches: the shard bounds and keyset pages
// are the source's, the target keeps the collation, every row arrives
// once, and verify (both sides merged in one byte order) finds the tables
// equal, then a changed row, which repair copies again.
func TestMySQL_CaseInsensitiveKey(t *testing.T) {
	inDirections(t, []direction{myToMy}, func(t *testing.T, e *env) {
		e.batchSize = 4
		exec1(t, e.srcDB, "CREATE TABLE words (w varchar(16) NOT NULL PRIMARY KEY, n int NOT NULL) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci")
		const rows = 60
		for i := range rows {
			first := rune('a' + i%26)
			if i%2 == 1 {
				first = unicode.ToUpper(first)
			}
			exec1(t, e.srcDB, "INSERT INTO words VALUES (?, ?)", fmt.Sprintf("%c%d", first, i), i)
		}
		plan := e.plan(t, planTable{name: "words", key: []string{"w"}, shards: 3})
		r := runMigrate(t, "run", "-p", plan, "--json")
		wantCode(t, r, 0)
		var rep runReport
		decodeJSON(t, r, &rep)
		if rep.Verify == nil || !rep.Verify.Equal || rep.RowsWritten != rows || len(rep.Shards) != 3 {
			t.Fatalf("run: %d rows in %d shards, verify %+v; want %d rows in 3 shards, equal", rep.RowsWritten, len(rep.Shards), rep.Verify, rows)
		}
		if got := queryStrings(t, e.dstDB, "SELECT collation_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'words' AND column_name = 'w'"); len(got) != 1 || got[0] != "utf8mb4_general_ci" {
			t.Errorf("target key collation %v, want the source's utf8mb4_general_ci", got)
		}
		exec1(t, e.dstDB, "UPDATE words SET n = -1 WHERE w = 'b1'") // finds 'B1'
		wantCode(t, runMigrate(t, "verify", "-p", plan), 3)
		wantCode(t, runMigrate(t, "repair", "-p", plan), 0)
		if n := queryInt(t, e.dstDB, "SELECT COUNT(*) FROM words WHERE n >= 0"); n != rows {
			t.Errorf("%d rows after the repair, want %d", n, rows)
		}
	})
}
