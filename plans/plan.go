// Package plans reads migration plans: the YAML plan file (SPEC §3) with
// ${VAR} expansion, defaults and validation that reports every problem with
// its file, line and column, the plan-less form built from flags, and
// connection strings (DSN) that print only in redacted form.
package plans

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Defaults applied when the plan file or flags leave a field out.
const (
	DefaultLeaseTTL    = 30 * time.Second
	DefaultBatchSize   = 1000
	DefaultFenceColumn = "_fence"
	DefaultMaxRetries  = 5
	// A shard taken over more than DefaultMaxTakeovers times within
	// DefaultTakeoverWindow is halted: something kills every holder.
	DefaultMaxTakeovers   = 3
	DefaultTakeoverWindow = 10 * time.Minute
	// DefaultMaxOutage outlasts a database restart or failover.
	DefaultMaxOutage = 5 * time.Minute
	DefaultShards    = ShardsAuto
)

// LockDB is `lock: db`: the leases are kept in the target database. It
// is the default when a plan names no lock service.
const LockDB = "db"

// ShardsAuto is `shards: auto` (and a table that says nothing): the first
// run chooses the count from the table's rows and the instance's cores,
// and every later run reads it back from the target.
const ShardsAuto = 0

// Limits checked by validation.
const (
	MinLeaseTTL  = 300 * time.Millisecond
	MaxBatchSize = 100000
	MaxShards    = 1024
)

// Plan is a validated migration plan.
type Plan struct {
	Name   string // names leases, checkpoints and fence rows; [a-z0-9_-]+
	File   string // path it was read from; "" for the flags form
	Source DSN    // postgres or mysql
	Target DSN    // postgres or mysql
	// Lock is the lock service that grants the shards' leases: a Redis
	// (redis://, Sentinel, Cluster), etcd (etcd://) or ZooKeeper (zk://)
	// URL, or a PostgreSQL or MySQL database (postgres://, mysql://) that
	// keeps them in a table. The zero DSN keeps them in the target
	// database: `lock: db`, and a plan with neither lock: nor redis:.
	Lock        DSN
	lockDB      bool          // lock: db was given (file or flag)
	LeaseTTL    time.Duration // default 30s, at least 300ms
	BatchSize   int           // default 1000, 1..100000
	FenceColumn string        // yaml fence_column, default "_fence"
	MaxRetries  int           // yaml max_retries, default 5, >= 0
	// A shard taken over more than MaxTakeovers times (yaml max_takeovers,
	// default 3) within TakeoverWindow (yaml takeover_window, default 10m)
	// is halted instead.
	MaxTakeovers   int
	TakeoverWindow time.Duration
	// MaxOutage (yaml max_outage, default 5m) is how long a database may
	// stay unreachable, restarting or failing over before a shard halts;
	// such failures do not count against MaxRetries.
	MaxOutage time.Duration
	// MaxRetainedLogMB (yaml max_retained_log_mb, default 0: no cap) halts
	// the change stream (run --follow) when the source keeps more than
	// this many MiB of its log for it (a PostgreSQL slot's WAL, MySQL's
	// binlogs from the stream's position), instead of filling its disk.
	MaxRetainedLogMB int
	// Discover: the tables are found in the source (a plan with no
	// tables list, or with include or exclude): every base table whose
	// name matches an Include pattern (all when none) and no Exclude
	// pattern, plus the tables listed, which override what is found
	// (Resolve). Patterns are globs (path.Match) over "schema.table"
	// when they hold a dot, else over the table's name.
	Discover bool
	Include  []string
	Exclude  []string
	Tables   []Table // at least one once resolved
	// Notify are the sinks the plan's events are delivered to (yaml
	// notify:); none: events are only kept in the outbox.
	Notify   []Sink
	resolved bool
}

// withDefaults is a plan with every default set, before the file or the
// flags say more.
func withDefaults() *Plan {
	return &Plan{
		LeaseTTL:       DefaultLeaseTTL,
		BatchSize:      DefaultBatchSize,
		FenceColumn:    DefaultFenceColumn,
		MaxRetries:     DefaultMaxRetries,
		MaxTakeovers:   DefaultMaxTakeovers,
		TakeoverWindow: DefaultTakeoverWindow,
		MaxOutage:      DefaultMaxOutage,
	}
}

// Table is one table to copy.
type Table struct {
	Name    string   // source table, optionally schema-qualified ("public.orders")
	Target  string   // target table; defaults to Name
	Key     []string // business key columns, in order; nil: the source's primary key, else a NOT NULL unique index (Resolve)
	Columns []string // columns to copy; nil means every source column
	Shards  int      // key ranges, each with its own lease and cursor; 1..1024, or ShardsAuto (the default) until setup resolves it
	// AutoShards: Shards was ShardsAuto and setup (or status) has set it
	// to the count chosen at the first run.
	AutoShards bool
	Types      map[string]string // column -> target type text, for a created target table; overrides the mapping
	Line       int               // line in the plan file where the table starts; 0 for flags
	Column     int               // column on Line where the table starts; 0 for flags
}

// SourceIdent splits Name into its identifier parts: "public.orders" gives
// ["public", "orders"], "orders" gives ["orders"].
func (t Table) SourceIdent() []string { return splitIdent(t.Name) }

// TargetIdent splits Target like SourceIdent.
func (t Table) TargetIdent() []string { return splitIdent(t.Target) }

func splitIdent(name string) []string { return strings.SplitN(name, ".", 2) }

// Table finds a table by its source name, or else by its target name.
func (p *Plan) Table(name string) (Table, bool) {
	if i := p.find(name); len(i) > 0 {
		return p.Tables[i[0]], true
	}
	return Table{}, false
}

// ByTarget is the table of the plan written to target table name.
func (p *Plan) ByTarget(name string) (Table, bool) {
	for _, t := range p.Tables {
		if t.Target == name {
			return t, true
		}
	}
	return Table{}, false
}

// find returns the indexes of the tables whose source name is name, or if
// there are none, of those whose target name is name.
func (p *Plan) find(name string) []int {
	var bySource, byTarget []int
	for i, t := range p.Tables {
		if t.Name == name {
			bySource = append(bySource, i)
		} else if t.Target == name {
			byTarget = append(byTarget, i)
		}
	}
	if len(bySource) > 0 {
		return bySource
	}
	return byTarget
}

// Load reads the plan file at path and parses it (see Parse).
func Load(path string, lookup func(string) (string, bool)) (*Plan, error) {
	return LoadWith(path, lookup, Overrides{})
}

// LoadWith reads the plan file at path and parses it with the flags o
// applied before validation (see ParseWith).
func LoadWith(path string, lookup func(string) (string, bool), o Overrides) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return ParseWith(path, data, lookup, o)
}

// Parse parses and validates a plan file. file names it in errors and in
// Plan.File ("" becomes "plan"). lookup resolves ${VAR} (nil means
// os.LookupEnv).
//
// ${VAR} is expanded in scalar values after YAML parsing, so a value cannot
// break the document and lines stay right; $${ is a literal ${, a bare $VAR
// is left alone, and expanded text is not expanded again. Inside a flow
// list or mapping ([...], {...}) quote a value that holds ${VAR}.
//
// Every problem found is returned, in an Errors whose lines read
// "file:line:column: msg" ("file:line: msg" for a YAML syntax error, whose
// column yaml.v3 does not report); the error matches ErrInvalid. Messages
// quote values as written in the file, never as expanded, and never quote a
// DSN.
func Parse(file string, data []byte, lookup func(string) (string, bool)) (*Plan, error) {
	return ParseWith(file, data, lookup, Overrides{})
}

// ParseWith is Parse with the flags o applied before validation, so a flag
// can stand in for a missing or broken field of the file (for example
// --source when the file's ${SOURCE_URL} is not set in this environment).
// Problems in fields the flags override are not reported.
func ParseWith(file string, data []byte, lookup func(string) (string, bool), o Overrides) (*Plan, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if file == "" {
		file = "plan"
	}
	d := &decoder{file: file, lookup: lookup}
	p, pp := d.decode(data)
	if p == nil {
		return nil, d.probs.err()
	}
	probs := d.probs
	overridden, oprobs := apply(p, pp, o)
	probs.drop(overridden)
	probs = append(probs, oprobs...)
	probs = append(probs, validate(p, pp)...)
	if err := probs.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// LockInTarget reports whether the leases are kept in the target database.
func (p *Plan) LockInTarget() bool { return p.Lock.IsZero() }

// LockName names the plan's lock service for messages: its redacted URL,
// or "db" for the target database.
func (p *Plan) LockName() string {
	if p.Lock.IsZero() {
		return "db"
	}
	return p.Lock.String()
}
