// Package mystream is MySQL/MariaDB change capture: the binlog in ROW
// format, read as a replica with go-mysql's BinlogSyncer, turned into
// stream.Tx values whose rows hold the Go values the project's own pool
// (dialect.MySQL, go-sql-driver through database/sql) reads for them.
//
// Positions are "gtid:<set>" where the server's GTIDs are usable (MariaDB:
// always once it has logged a transaction; MySQL: gtid_mode=ON) and
// "file:<binlog>:<offset>" otherwise. Nothing is created at the source:
// the binlog is the server's, kept for binlog_expire_logs_seconds, and a
// position whose binlog was purged is stream.ErrGone.
package mystream

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
)

// Flavors, as go-mysql names them.
const (
	flavorMySQL   = gomysql.MySQLFlavor
	flavorMariaDB = gomysql.MariaDBFlavor
)

// Capture is one MySQL/MariaDB source's change capture: stream.Capture.
type Capture struct {
	// Tables are the (database, table) pairs whose changes are delivered;
	// Start sets them from its argument. A process that resumes without
	// calling Start sets them before Open.
	Tables [][2]string
	// FilePositions makes Start return a "file:<binlog>:<offset>" position
	// even where GTIDs are usable (Open follows whatever position it is
	// given).
	FilePositions bool
	// HeartbeatPeriod is how often the server sends a heartbeat when it has
	// nothing to send (Behind's "caught up"); 0 is one second.
	HeartbeatPeriod time.Duration
	// RawTimes delivers DATE, DATETIME and TIMESTAMP values as the text the
	// driver returns without parseTime (dialect.Session.RawTimes: how
	// migrate reads a MySQL source), not as time.Time.
	RawTimes bool

	dsn      plans.DSN
	name     string
	serverID uint32

	mu     sync.Mutex
	db     *sql.DB // the project's pool, for positions and column definitions
	flavor string  // flavorMySQL or flavorMariaDB, from VERSION()
}

var _ stream.Capture = (*Capture)(nil)

// New is the capture of the source at dsn for the plan name. serverID is
// the replica id the binlog reader registers with: it must be unique among
// the server's replicas and readers (a second reader with the same id
// makes the server drop the first one); 0 derives one from name and a
// random number.
func New(dsn plans.DSN, name string, serverID uint32) *Capture {
	if serverID == 0 {
		serverID = deriveServerID(name)
	}
	return &Capture{dsn: dsn, name: name, serverID: serverID}
}

// deriveServerID is a replica id from name's hash mixed with random bits:
// never 0, and away from the small ids servers are usually given.
func deriveServerID(name string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := h.Sum32() ^ binary.LittleEndian.Uint32(b[:])
	if id < 1<<16 {
		id |= 1 << 31
	}
	return id
}

// ServerID is the replica id the capture's readers register with.
func (c *Capture) ServerID() uint32 { return c.serverID }

// pool is the capture's connection pool to the source and the server's
// flavor, opened on first use.
func (c *Capture) pool(ctx context.Context) (*sql.DB, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db != nil {
		return c.db, c.flavor, nil
	}
	db, err := dialect.MySQL{}.Open(c.dsn, dialect.Session{})
	if err != nil {
		return nil, "", err
	}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		_ = db.Close()
		return nil, "", fmt.Errorf("mystream: connect to %s: %w (check the DSN and that the server is up)", c.dsn, err)
	}
	c.db, c.flavor = db, flavorMySQL
	if strings.Contains(strings.ToLower(version), "mariadb") {
		c.flavor = flavorMariaDB
	}
	return c.db, c.flavor, nil
}

// Start implements stream.Capture: nothing to create, the server's current
// position, from which Open delivers every change committed after it.
func (c *Capture) Start(ctx context.Context, tables [][2]string) (stream.Pos, error) {
	c.Tables = append([][2]string(nil), tables...)
	db, flavor, err := c.pool(ctx)
	if err != nil {
		return "", err
	}
	if !c.FilePositions {
		set, err := currentGTIDs(ctx, db, flavor)
		if err != nil {
			return "", err
		}
		if set != "" {
			return stream.Pos("gtid:" + set), nil
		}
	}
	file, off, err := masterStatus(ctx, db)
	if err != nil {
		return "", err
	}
	return filePos(file, off), nil
}

// currentGTIDs is the server's executed GTIDs ("" when GTIDs are not
// usable: MySQL without gtid_mode=ON, MariaDB before its first GTID).
func currentGTIDs(ctx context.Context, db *sql.DB, flavor string) (string, error) {
	var set string
	if flavor == flavorMariaDB {
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&set); err != nil {
			return "", fmt.Errorf("mystream: read @@gtid_binlog_pos: %w", err)
		}
		return strings.TrimSpace(set), nil
	}
	var mode string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "ON") {
		return "", nil //nolint:nilerr // no gtid_mode: file positions
	}
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&set); err != nil {
		return "", fmt.Errorf("mystream: read @@gtid_executed: %w", err)
	}
	return strings.Join(strings.Fields(set), ""), nil // MySQL breaks long sets with newlines
}

// masterStatus is the server's current binlog file and offset: SHOW MASTER
// STATUS, or SHOW BINARY LOG STATUS where MySQL 8.4 removed the former.
func masterStatus(ctx context.Context, db *sql.DB) (string, uint32, error) {
	var lastErr error
	for _, q := range []string{"SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"} {
		file, off, err := readStatus(ctx, db, q)
		if err == nil {
			return file, off, nil
		}
		lastErr = err
	}
	return "", 0, lastErr
}

func readStatus(ctx context.Context, db *sql.DB, query string) (string, uint32, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return "", 0, fmt.Errorf("mystream: %s: %w (the user needs the REPLICATION CLIENT privilege)", query, err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return "", 0, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", 0, err
		}
		return "", 0, fmt.Errorf("mystream: %s returned nothing: the binary log is off (start the server with --log-bin)", query)
	}
	vals := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := rows.Scan(dest...); err != nil {
		return "", 0, err
	}
	if len(vals) < 2 {
		return "", 0, fmt.Errorf("mystream: %s: unexpected columns %v", query, cols)
	}
	off, err := strconv.ParseUint(string(vals[1]), 10, 32)
	if err != nil {
		return "", 0, fmt.Errorf("mystream: %s: position %q: %w", query, vals[1], err)
	}
	return string(vals[0]), uint32(off), rows.Err()
}

// binlogs is SHOW BINARY LOGS: each file's name and size, oldest first.
func binlogs(ctx context.Context, db *sql.DB) ([]string, []int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, nil, fmt.Errorf("mystream: SHOW BINARY LOGS: %w (the user needs the REPLICATION CLIENT privilege, and the server --log-bin)", err)
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var sizes []int64
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		size, _ := strconv.ParseInt(string(vals[1]), 10, 64)
		names = append(names, string(vals[0]))
		sizes = append(sizes, size)
	}
	return names, sizes, rows.Err()
}

// Retained implements stream.Capture. A file position is readable while
// its binlog is among SHOW BINARY LOGS, and keeps the sizes of that file
// and every later one. A GTID position is readable while no GTID after it
// was purged (MySQL: @@gtid_purged within it; MariaDB: the GTID state at
// the start of the oldest binlog within it); its bytes are unknown (-1).
func (c *Capture) Retained(ctx context.Context, pos stream.Pos) (int64, bool, error) {
	p, err := parsePos(pos)
	if err != nil {
		return -1, false, err
	}
	db, flavor, err := c.pool(ctx)
	if err != nil {
		return -1, false, err
	}
	names, sizes, err := binlogs(ctx, db)
	if err != nil {
		return -1, false, err
	}
	if p.gtid == "" {
		bytes, ok := retainedFile(p.file, names, sizes)
		return bytes, ok, nil
	}
	if flavor == flavorMariaDB {
		if len(names) == 0 {
			return -1, false, nil
		}
		var oldest sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, 4)", names[0]).Scan(&oldest); err != nil {
			return -1, false, fmt.Errorf("mystream: the GTID state of binlog %s: %w", names[0], err)
		}
		ok, err := gtidRetained(flavor, p.gtid, oldest.String)
		return -1, ok, err
	}
	var purged string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_purged").Scan(&purged); err != nil {
		return -1, false, fmt.Errorf("mystream: read @@gtid_purged: %w", err)
	}
	ok, err := gtidRetained(flavor, p.gtid, strings.Join(strings.Fields(purged), ""))
	return -1, ok, err
}

// retainedFile is the bytes kept from file on, and whether file is kept.
func retainedFile(file string, names []string, sizes []int64) (int64, bool) {
	for i, n := range names {
		if n == file {
			var sum int64
			for _, s := range sizes[i:] {
				sum += s
			}
			return sum, true
		}
	}
	return -1, false
}

// gtidRetained is whether every transaction after the GTID position pos is
// still in the binlogs, given what was purged: MySQL's gtid_purged (every
// purged GTID must be in pos), MariaDB's state before the oldest binlog
// (pos must have reached it in every domain).
func gtidRetained(flavor, pos, purged string) (bool, error) {
	if purged == "" {
		return true, nil
	}
	have, err := gomysql.ParseGTIDSet(flavor, pos)
	if err != nil {
		return false, fmt.Errorf("mystream: position gtid:%s: %w", pos, err)
	}
	gone, err := gomysql.ParseGTIDSet(flavor, purged)
	if err != nil {
		return false, fmt.Errorf("mystream: the server's purged GTIDs %q: %w", purged, err)
	}
	return have.Contain(gone), nil
}

// Stop implements stream.Capture: nothing to drop; the pool is closed.
func (c *Capture) Stop(context.Context, bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == nil {
		return nil
	}
	err := c.db.Close()
	c.db = nil
	return err
}

// position is a parsed stream.Pos: a GTID set, or a binlog file and offset.
type position struct {
	gtid string
	file string
	off  uint32
}

func parsePos(p stream.Pos) (position, error) {
	s := string(p)
	if set, ok := strings.CutPrefix(s, "gtid:"); ok {
		if set == "" {
			return position{}, fmt.Errorf("mystream: position %q has an empty GTID set", s)
		}
		return position{gtid: set}, nil
	}
	if rest, ok := strings.CutPrefix(s, "file:"); ok {
		i := strings.LastIndexByte(rest, ':')
		if i > 0 {
			off, err := strconv.ParseUint(rest[i+1:], 10, 32)
			if err == nil {
				return position{file: rest[:i], off: uint32(off)}, nil
			}
		}
	}
	return position{}, fmt.Errorf("mystream: position %q is neither gtid:<set> nor file:<binlog>:<offset>", s)
}

func filePos(file string, off uint32) stream.Pos {
	return stream.Pos("file:" + file + ":" + strconv.FormatUint(uint64(off), 10))
}

// errGone wraps stream.ErrGone with what is gone and what to do.
func errGone(pos stream.Pos) error {
	return fmt.Errorf("%w: %s is no longer in the server's binlogs (raise binlog_expire_logs_seconds, then copy the tables again)", stream.ErrGone, pos)
}
