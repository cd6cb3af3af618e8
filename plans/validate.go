package plans

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// validName is the plan name pattern [a-z0-9_-]+.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// validIdent checks a column or table name part: the drivers quote
// identifiers, so anything but empty names and NUL bytes is allowed.
func validIdent(s string) bool { return s != "" && !strings.ContainsRune(s, 0) }

// validTableName checks "table" or "schema.table".
func validTableName(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if !validIdent(part) {
			return false
		}
	}
	return strings.Count(s, ".") <= 1
}

// fillDefaults sets the defaults that depend on other fields: a table's
// target defaults to its source name, without the schema when the engines
// differ (a PostgreSQL schema is not a MySQL database).
// ReservedPrefix begins the names of migrate's own tables in the target
// (checkpoints, fence watermarks, post-load steps, takeovers, progress,
// leases): no table of a plan may be written there.
const ReservedPrefix = "_migrate_"

// reserved says whether a target table name (table or schema.table) is
// one of migrate's own, whatever its case (MySQL may fold it).
func reserved(target string) bool {
	parts := strings.Split(target, ".")
	return strings.HasPrefix(strings.ToLower(parts[len(parts)-1]), ReservedPrefix)
}

func fillDefaults(p *Plan, pp *planPos) {
	for i := range p.Tables {
		t := &p.Tables[i]
		if t.Target == "" && i < len(pp.tables) && !pp.tables[i].has("target") && !pp.tables[i].bad["target"] {
			t.Target = t.Name
			if p.Source.Engine() != p.Target.Engine() {
				parts := splitIdent(t.Name)
				t.Target = parts[len(parts)-1]
			}
		}
	}
}

// validate checks a decoded plan with its defaults and flags applied. It
// skips fields already reported as unreadable.
func validate(p *Plan, pp *planPos) problems {
	var ps problems
	f := pp.fields
	check := func(name string, bad bool, format string, args ...any) {
		if bad && !f.bad[name] {
			ps.add(f.tag(name), f.where(name), format, args...)
		}
	}

	check("name", p.Name == "", "%s", f.missing("name"))
	check("name", p.Name != "" && !validName(p.Name), "name %s must match [a-z0-9_-]+", f.show("name", p.Name))
	ps = append(ps, checkDSN(f, "source", p.Source, Postgres, MySQL)...)
	ps = append(ps, checkDSN(f, "target", p.Target, Postgres, MySQL)...)
	ps = append(ps, checkLock(p, f)...)
	check("lease_ttl", p.LeaseTTL < MinLeaseTTL, "lease_ttl %v is too short (at least %v)", p.LeaseTTL, MinLeaseTTL)
	check("batch_size", p.BatchSize < 1 || p.BatchSize > MaxBatchSize, "batch_size %d is out of range 1..%d", p.BatchSize, MaxBatchSize)
	check("fence_column", !validIdent(p.FenceColumn), "fence_column must be a non-empty column name without NUL bytes")
	check("max_retries", p.MaxRetries < 0, "max_retries %d must not be negative", p.MaxRetries)
	check("max_takeovers", p.MaxTakeovers < 1, "max_takeovers %d must be at least 1", p.MaxTakeovers)
	check("takeover_window", p.TakeoverWindow <= 0, "takeover_window %v must be positive", p.TakeoverWindow)
	check("max_retained_log_mb", p.MaxRetainedLogMB < 0, "max_retained_log_mb %d must not be negative (0: no cap)", p.MaxRetainedLogMB)
	check("max_outage", p.MaxOutage < 0, "max_outage %v must not be negative (0: an unreachable database counts against max_retries)", p.MaxOutage)
	switch {
	case p.Discover:
		for _, name := range []string{"include", "exclude"} {
			pats := p.Include
			if name == "exclude" {
				pats = p.Exclude
			}
			for j, pat := range pats {
				if _, err := path.Match(pat, ""); err != nil || pat == "" {
					ps.add(f.tag(name), f.item(name, j), "%s pattern %s is not a glob (e.g. \"public.*\", \"audit_*\")", name, f.showItem(name, j, pat))
				}
			}
		}
	case f.where("tables").file == "":
		check("tables", len(p.Tables) == 0, "table is required (or --include to copy every table that matches)")
	default:
		check("tables", len(p.Tables) == 0, "at least one table is required (tables: - name: ...), or leave tables out to copy every table of the source")
	}

	// Leases, checkpoints and fence rows are per target table: two tables
	// of a plan writing one target would share them.
	first := map[string]pos{}
	for i := range p.Tables {
		if i >= len(pp.tables) || pp.tables[i].broken {
			continue
		}
		t, tf := p.Tables[i], pp.tables[i]
		ps = append(ps, validateTable(t, tf, i, p.FenceColumn)...)
		if t.Name == "" {
			continue
		}
		if at, dup := first[t.Target]; dup {
			where := "also given by flags"
			if at.line > 0 {
				where = "first at " + at.place()
			}
			ps.add("", tf.base, "target table %s is written by two tables of the plan (%s); each target table needs its own plan", tf.show("target", t.Target), where)
			continue
		}
		first[t.Target] = tf.base
	}
	return ps
}

// checkLock checks the lock service: redis: a Redis URL, lock: db or the
// URL of a lock service, never both; etcd grants leases in whole seconds.
func checkLock(p *Plan, f *fields) problems {
	var ps problems
	switch {
	case f.has("lock") && f.has("redis") && !f.bad["lock"] && !f.bad["redis"]:
		ps.add(f.tag("redis"), f.where("redis"), "give lock: or redis:, not both (redis: URL is lock: URL); lock: is at %s", f.where("lock").place())
		return ps
	case f.has("redis"):
		ps = append(ps, checkDSN(f, "redis", p.Lock, Redis)...)
	case f.has("lock") && !p.lockDB:
		ps = append(ps, checkDSN(f, "lock", p.Lock, Redis, Etcd, ZooKeeper, Postgres, MySQL)...)
	}
	if p.Lock.Engine() == Etcd && p.LeaseTTL%time.Second != 0 && !f.bad["lease_ttl"] {
		ps.add(f.tag("lease_ttl"), f.where("lease_ttl"), "lease_ttl %v: etcd grants leases in whole seconds (lock: etcd://…); use e.g. %v",
			p.LeaseTTL, max(p.LeaseTTL.Round(time.Second), time.Second))
	}
	return ps
}

// checkDSN checks that a connection string is given and of a wanted engine.
func checkDSN(f *fields, name string, d DSN, want ...Engine) problems {
	var ps problems
	if f.bad[name] {
		return nil
	}
	if d.IsZero() {
		ps.add(f.tag(name), f.where(name), "%s", f.missing(name))
		return ps
	}
	for _, e := range want {
		if d.Engine() == e {
			return nil
		}
	}
	schemes := make([]string, len(want))
	for i, e := range want {
		schemes[i] = string(e) + "://"
	}
	ps.add(f.tag(name), f.where(name), "%s must be a %s DSN, not %s", name, strings.Join(schemes, " or "), d.Engine())
	return ps
}

// tableLabel names a table in messages: `table "public.orders": `.
func tableLabel(t Table, tf *fields, i int) string {
	if t.Name == "" {
		return fmt.Sprintf("table #%d: ", i+1)
	}
	return "table " + tf.show("name", t.Name) + ": "
}

func validateTable(t Table, tf *fields, i int, fence string) problems {
	var ps problems
	label := tableLabel(t, tf, i)
	check := func(name string, bad bool, format string, args ...any) {
		if bad && !tf.bad[name] {
			ps.add(tf.tag(name), tf.where(name), label+format, args...)
		}
	}
	check("name", t.Name == "", "%s", tf.missing("name"))
	check("name", t.Name != "" && !validTableName(t.Name), "name %s must be table or schema.table", tf.show("name", t.Name))
	check("target", t.Target == "" && tf.has("target"), "%s", tf.missing("target"))
	check("target", t.Target != "" && !validTableName(t.Target), "target %s must be table or schema.table", tf.show("target", t.Target))
	check("target", t.Target != "" && validTableName(t.Target) && reserved(t.Target), "target %s is a name migrate keeps for its own tables in the target (_migrate_*); give the table another target name", tf.show("target", t.Target))
	check("shards", t.Shards < 0 || t.Shards > MaxShards, "shards %d is out of range 1..%d (or auto)", shardsShown(t.Shards), MaxShards)

	if !tf.bad["key"] {
		if len(t.Key) == 0 && tf.has("key") && tf.where("key") != flagsPos {
			ps.add(tf.tag("key"), tf.where("key"), "%skey must name at least one column (leave it out for the primary key)", label)
		}
		ps = append(ps, checkColumns(tf, "key", t.Key, label, fence)...)
	}
	if !tf.bad["columns"] && t.Columns != nil {
		if len(t.Columns) == 0 {
			ps.add(tf.tag("columns"), tf.where("columns"), "%scolumns is empty; leave it out to copy every column", label)
		}
		ps = append(ps, checkColumns(tf, "columns", t.Columns, label, fence)...)
		if !tf.bad["key"] {
			have := map[string]bool{}
			for _, c := range t.Columns {
				have[c] = true
			}
			at := tf.where("columns")
			if tf.where("key") == flagsPos {
				at = flagsPos // the key flag caused it
			}
			for j, k := range t.Key {
				if !have[k] && validIdent(k) {
					have[k] = true // report each missing key column once
					ps.add(tf.tag("columns"), at, "%scolumns must include key column %s", label, tf.showItem("key", j, k))
				}
			}
		}
	}
	return ps
}

// checkColumns checks a list of column names: valid, no duplicates, not the
// fence column.
func checkColumns(tf *fields, name string, cols []string, label, fence string) problems {
	var ps problems
	seen := map[string]bool{}
	for j, c := range cols {
		at := tf.item(name, j)
		switch {
		case c == "":
			ps.add(tf.tag(name), at, "%s%s has an empty column name", label, name)
		case !validIdent(c):
			ps.add(tf.tag(name), at, "%s%s column %s contains a NUL byte", label, name, tf.showItem(name, j, c))
		case seen[c]:
			ps.add(tf.tag(name), at, "%s%s lists column %s twice", label, name, tf.showItem(name, j, c))
		case c == fence:
			ps.add(tf.tag(name), at, "%s%s lists the fence column %s, which the migration writes itself", label, name, tf.showItem(name, j, c))
		}
		seen[c] = true
	}
	return ps
}

// fastRow is what writing one row takes in a fast copy (about 100,000 rows
// a second between two local databases): the least a batch can cost.
const fastRow = 10 * time.Microsecond

// Warnings are what is valid but will not work as the plan reads. A batch
// starts only when twice its write time is left before the lease's local
// deadline, which a renewal puts at most 0.89 × lease_ttl ahead (lock:
// TTL less the drift and safety margins): a batch_size whose batches take
// longer, even at fastRow, is written in smaller batches.
func (p *Plan) Warnings() []string {
	var out []string
	runway := p.LeaseTTL * 89 / 100
	batch := time.Duration(p.BatchSize) * fastRow
	if 2*batch+20*time.Millisecond > runway {
		fits := max(int((runway-20*time.Millisecond)/(2*fastRow)), 0)
		ttl := ((2*batch+20*time.Millisecond)*100/89 + 99*time.Millisecond).Truncate(100 * time.Millisecond)
		out = append(out, fmt.Sprintf("lease_ttl %v with batch_size %d: even at %v a row a batch takes %v, and a batch starts only with twice its time left before the lease's local deadline (at most %v ahead): batches will be cut to at most %d rows; use lease_ttl >= %v or batch_size <= %d",
			p.LeaseTTL, p.BatchSize, fastRow, batch, runway, fits, ttl, fits))
	}
	return out
}

// shardsZero is a `shards: 0` written in a plan file, which is not auto.
const shardsZero = -1 << 31

// shardsShown is a shard count as the plan wrote it.
func shardsShown(n int) int {
	if n == shardsZero {
		return 0
	}
	return n
}
