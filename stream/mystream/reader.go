package mystream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/google/uuid"

	"github.com/migrate-dev/migrate/stream"
)

// reader is one binlog connection: stream.Reader.
type reader struct {
	rawTimes  bool       // Capture.RawTimes
	skipped   stream.Pos // the end of the last transaction passed over, not delivered yet
	delivered time.Time  // when a Tx was last delivered
	db        *sql.DB
	flavor    string
	pos       stream.Pos // where it was opened
	start     position
	syncer    *replication.BinlogSyncer
	events    *replication.BinlogStreamer
	hb        time.Duration

	want map[[2]string]bool
	defs map[[2]string]*table // definitions read, dropped on DDL
	byID map[uint64]*table    // the binlog's table ids

	file string          // the binlog being read
	gset gomysql.GTIDSet // GTID mode: every transaction read; nil in file mode

	// the transaction being read
	inTx, begun bool
	mariaGTID   gomysql.MariadbGTID
	mysqlSID    []byte
	mysqlGNO    int64
	mysqlTag    *gomysql.Tag
	hasGTID     bool
	changes     []stream.Change
	bytes       int64

	mu          sync.Mutex // guards the lag fields, read by Behind
	lastEvent   time.Time
	caughtUp    bool
	readFile    string
	readOff     uint32
	masterFile  string
	masterOff   uint32
	masterKnown bool

	pollStop  context.CancelFunc
	pollDone  chan struct{}
	closeOnce sync.Once
}

var _ stream.Reader = (*reader)(nil)

// Open implements stream.Capture: a binlog reader from pos on, delivering
// the committed transactions of Tables that change rows. A position whose
// binlog was purged is stream.ErrGone.
func (c *Capture) Open(ctx context.Context, pos stream.Pos) (stream.Reader, error) {
	p, err := parsePos(pos)
	if err != nil {
		return nil, err
	}
	db, flavor, err := c.pool(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok, err := c.Retained(ctx, pos); err != nil {
		return nil, err
	} else if !ok {
		return nil, errGone(pos)
	}
	var own uint32
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.server_id").Scan(&own); err != nil {
		return nil, fmt.Errorf("mystream: read @@server_id: %w", err)
	}
	if own == c.serverID {
		return nil, fmt.Errorf("mystream: replica id %d is the server's own server_id: give the capture another", c.serverID)
	}
	cfg, err := syncerConfig(c.dsn)
	if err != nil {
		return nil, err
	}
	hb := c.HeartbeatPeriod
	if hb <= 0 {
		hb = time.Second
	}
	cfg.ServerID, cfg.Flavor = c.serverID, flavor
	cfg.HeartbeatPeriod = hb
	// A silent connection (no event, no heartbeat) is dead.
	cfg.ReadTimeout = max(5*hb, 10*time.Second)
	// A broken connection ends the stream: resuming in the middle of a
	// transaction is not ours to do; the caller reopens from its position.
	cfg.DisableRetrySync = true
	cfg.ParseTime = true
	cfg.TimestampStringLocation = time.UTC
	cfg.RenderJSONAsMySQLText = true
	cfg.Logger = slog.New(slog.DiscardHandler)

	if c.RawTimes {
		cfg.ParseTime = false // the text the server wrote, zero dates too
	}
	r := &reader{
		rawTimes: c.RawTimes,
		db:       db, flavor: flavor, pos: pos, start: p, hb: hb,
		want: map[[2]string]bool{}, defs: map[[2]string]*table{}, byID: map[uint64]*table{},
		file: p.file, readFile: p.file, readOff: p.off,
	}
	for _, t := range c.Tables {
		r.want[t] = true
	}
	r.syncer = replication.NewBinlogSyncer(cfg)
	if p.gtid != "" {
		set, err := gomysql.ParseGTIDSet(flavor, p.gtid)
		if err != nil {
			r.syncer.Close()
			return nil, fmt.Errorf("mystream: position %s: %w", pos, err)
		}
		r.gset = set.Clone()
		r.events, err = r.syncer.StartSyncGTID(set)
		if err != nil {
			r.syncer.Close()
			return nil, fmt.Errorf("mystream: start reading the binlog at %s: %w", pos, err)
		}
	} else {
		r.events, err = r.syncer.StartSync(gomysql.Position{Name: p.file, Pos: p.off})
		if err != nil {
			r.syncer.Close()
			return nil, fmt.Errorf("mystream: start reading the binlog at %s: %w", pos, err)
		}
	}
	pctx, stop := context.WithCancel(context.Background())
	r.pollStop, r.pollDone = stop, make(chan struct{})
	go r.pollMaster(pctx)
	return r, nil
}

// Next implements stream.Reader.
func (r *reader) Next(ctx context.Context) (stream.Tx, error) {
	for {
		ev, err := r.events.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return stream.Tx{}, ctx.Err()
			}
			return stream.Tx{}, r.streamError(err)
		}
		tx, done, err := r.handle(ctx, ev.Header, ev.Event)
		if err != nil {
			return stream.Tx{}, err
		}
		if done {
			return tx, nil
		}
	}
}

// streamError is the stream's end, named: a purged position is
// stream.ErrGone.
func (r *reader) streamError(err error) error {
	var me *gomysql.MyError
	if errors.As(err, &me) && me.Code == gomysql.ER_MASTER_FATAL_ERROR_READING_BINLOG {
		msg := strings.ToLower(me.Message)
		if strings.Contains(msg, "purged") || strings.Contains(msg, "could not find") {
			return fmt.Errorf("%w (server: %s)", errGone(r.pos), me.Message)
		}
	}
	if errors.Is(err, replication.ErrNeedSyncAgain) || errors.Is(err, replication.ErrSyncClosed) {
		return fmt.Errorf("mystream: the binlog reader from %s is closed: open a new one from the last committed position", r.pos)
	}
	return fmt.Errorf("mystream: reading the binlog (opened at %s): %w; open a new reader from the last committed position", r.pos, err)
}

// handle takes one event; done is a committed transaction with changes
// of the capture's tables, in tx.
func (r *reader) handle(ctx context.Context, h *replication.EventHeader, e replication.Event) (tx stream.Tx, done bool, err error) {
	if hb, ok := e.(*replication.HeartbeatEvent); ok {
		r.mu.Lock()
		r.caughtUp = !r.inTx
		r.masterFile, r.masterOff, r.masterKnown = hb.Filename, h.LogPos, hb.Filename != ""
		r.mu.Unlock()
		return r.passed(true)
	}
	r.mu.Lock()
	if h.Timestamp != 0 {
		r.lastEvent = time.Unix(int64(h.Timestamp), 0)
	}
	r.caughtUp = false
	if h.LogPos != 0 && r.file != "" {
		r.readFile, r.readOff = r.file, h.LogPos
	}
	r.mu.Unlock()
	if r.inTx {
		r.bytes += int64(h.EventSize)
	}
	switch ev := e.(type) {
	case *replication.RotateEvent:
		r.file = string(ev.NextLogName)
	case *replication.MariadbGTIDEvent:
		r.beginTx(h)
		r.mariaGTID, r.hasGTID = ev.GTID, true
		r.begun = !ev.IsStandalone()
	case *replication.GTIDEvent:
		r.beginTx(h)
		r.mysqlSID, r.mysqlGNO, r.hasGTID = append([]byte(nil), ev.SID...), ev.GNO, ev.GNO != 0
	case *replication.GtidTaggedLogEvent:
		r.beginTx(h)
		r.mysqlSID, r.mysqlGNO, r.hasGTID = append([]byte(nil), ev.SID...), ev.GNO, ev.GNO != 0
		r.mysqlTag = &ev.Tag
	case *replication.QueryEvent:
		q := strings.ToUpper(strings.TrimSpace(string(ev.Query)))
		switch {
		case q == "BEGIN":
			if !r.inTx {
				r.beginTx(h)
			}
			r.begun = true
		case q == "COMMIT":
			return r.commit(h)
		case strings.HasPrefix(q, "SAVEPOINT"), strings.HasPrefix(q, "ROLLBACK TO"), strings.HasPrefix(q, "XA "):
		default:
			// DDL (or a statement logged as text): definitions are read
			// again; outside BEGIN it is a transaction of its own.
			clear(r.defs)
			if !r.begun {
				return r.commit(h)
			}
		}
	case *replication.TableMapEvent:
		return stream.Tx{}, false, r.mapTable(ctx, ev)
	case *replication.RowsEvent:
		return stream.Tx{}, false, r.rows(h, ev)
	case *replication.XIDEvent:
		return r.commit(h)
	case *replication.TransactionPayloadEvent:
		for _, inner := range ev.Events {
			ih := *inner.Header
			ih.LogPos = h.LogPos
			tx, done, err := r.handle(ctx, &ih, inner.Event)
			if err != nil || done {
				return tx, done, err
			}
		}
	}
	return stream.Tx{}, false, nil
}

// passed delivers the position after transactions of other tables, as a
// Tx without changes (stream.Reader): on a heartbeat (idle), or when none
// was delivered for passEvery, so that the committed position follows the
// source's and a cutover finds it caught up.
func (r *reader) passed(idle bool) (stream.Tx, bool, error) {
	if r.skipped == "" || !idle && time.Since(r.delivered) < passEvery {
		return stream.Tx{}, false, nil
	}
	end := r.skipped
	r.skipped, r.delivered = "", time.Now()
	return stream.Tx{End: end}, true, nil
}

// passEvery is how often a busy server's other transactions move the
// position on.
const passEvery = 200 * time.Millisecond

func (r *reader) beginTx(h *replication.EventHeader) {
	r.inTx, r.begun, r.hasGTID, r.mysqlTag = true, false, false, nil
	r.changes = nil
	r.bytes = int64(h.EventSize)
}

// commit ends the transaction being read at the event h: its End is the
// position after it.
func (r *reader) commit(h *replication.EventHeader) (stream.Tx, bool, error) {
	changes, bytes := r.changes, r.bytes
	covered := false
	var end stream.Pos
	if r.gset != nil {
		if r.hasGTID {
			var err error
			covered, err = r.addGTID()
			if err != nil {
				return stream.Tx{}, false, err
			}
		}
		end = stream.Pos("gtid:" + r.gset.String())
	} else {
		end = filePos(r.file, h.LogPos)
		covered = r.file == r.start.file && h.LogPos <= r.start.off
	}
	r.inTx, r.begun, r.hasGTID, r.changes, r.bytes = false, false, false, nil, 0
	if covered {
		return stream.Tx{}, false, nil
	}
	if len(changes) == 0 {
		r.skipped = end
		return r.passed(false)
	}
	r.skipped, r.delivered = "", time.Now()
	return stream.Tx{Changes: changes, End: end, Commit: time.Unix(int64(h.Timestamp), 0), Bytes: bytes}, true, nil
}

// addGTID adds the transaction's GTID to the set read; covered is a GTID
// the set had already (a transaction at or before the opening position).
func (r *reader) addGTID() (covered bool, err error) {
	switch set := r.gset.(type) {
	case *gomysql.MariadbGTIDSet:
		g := r.mariaGTID
		if cur, ok := set.Sets[g.DomainID]; ok && cur.SequenceNumber >= g.SequenceNumber {
			return true, nil
		}
		return false, set.AddSet(&g)
	case *gomysql.MysqlGTIDSet:
		u, err := uuid.FromBytes(r.mysqlSID)
		if err != nil {
			return false, fmt.Errorf("mystream: GTID event: %w", err)
		}
		if r.mysqlTag != nil {
			set.AddGTIDWithTag(u, *r.mysqlTag, r.mysqlGNO)
			return false, nil
		}
		one, err := gomysql.ParseMysqlGTIDSet(fmt.Sprintf("%s:%d", u, r.mysqlGNO))
		if err == nil && set.Contain(one) {
			return true, nil
		}
		set.AddGTID(u, r.mysqlGNO)
	}
	return false, nil
}

// mapTable resolves a table map: the capture's tables get their columns.
func (r *reader) mapTable(ctx context.Context, ev *replication.TableMapEvent) error {
	key := [2]string{string(ev.Schema), string(ev.Table)}
	if !r.want[key] {
		r.byID[ev.TableID] = &table{schema: key[0], name: key[1]}
		return nil
	}
	t := r.defs[key]
	if t == nil {
		var err error
		if t, err = loadTable(ctx, r.db, key[0], key[1]); err != nil {
			return err
		}
		r.defs[key] = t
	}
	if int(ev.ColumnCount) != len(t.cols) {
		return fmt.Errorf("mystream: %s.%s has %d columns in the binlog and %d now: its definition changed since (copy the table again)", key[0], key[1], ev.ColumnCount, len(t.cols))
	}
	r.byID[ev.TableID] = t
	return nil
}

// rows turns a rows event of a capture's table into changes.
func (r *reader) rows(h *replication.EventHeader, ev *replication.RowsEvent) error {
	t := r.byID[ev.TableID]
	if t == nil {
		return fmt.Errorf("mystream: rows of table id %d before its table map (binlog event at %s:%d)", ev.TableID, r.file, h.LogPos)
	}
	if !t.want {
		return nil
	}
	op := stream.Op(0)
	switch ev.Type() {
	case replication.EnumRowsEventTypeInsert:
		op = stream.Insert
	case replication.EnumRowsEventTypeUpdate:
		op = stream.Update
	case replication.EnumRowsEventTypeDelete:
		op = stream.Delete
	default:
		return fmt.Errorf("mystream: %s.%s: binlog event %s is not supported (set binlog_row_value_options='' on the server)", t.schema, t.name, h.EventType)
	}
	step := 1
	if op == stream.Update {
		step = 2
	}
	if len(ev.Rows)%step != 0 {
		return fmt.Errorf("mystream: %s.%s: an update event with %d row images", t.schema, t.name, len(ev.Rows))
	}
	for i := 0; i < len(ev.Rows); i += step {
		ch := stream.Change{Schema: t.schema, Table: t.name, Op: op, Columns: t.names}
		img, err := r.image(t, ev.Rows[i], ev.SkippedColumns, i)
		if err != nil {
			return err
		}
		switch op {
		case stream.Insert:
			ch.New = img
		case stream.Delete:
			ch.Old, ch.OldHas = img, allTrue(len(img))
		case stream.Update:
			ch.Old, ch.OldHas = img, allTrue(len(img))
			if ch.New, err = r.image(t, ev.Rows[i+1], ev.SkippedColumns, i+1); err != nil {
				return err
			}
		}
		r.changes = append(r.changes, ch)
	}
	return nil
}

// image is one row image's values, converted.
func (r *reader) image(t *table, row []any, skipped [][]int, i int) ([]any, error) {
	if i < len(skipped) && len(skipped[i]) > 0 || len(row) != len(t.cols) {
		return nil, fmt.Errorf("mystream: %s.%s: the binlog has a partial row image (set binlog_row_image=FULL on the server)", t.schema, t.name)
	}
	out := make([]any, len(row))
	for j, v := range row {
		c := &t.cols[j]
		if r.rawTimes && v != nil && (c.kind == kDate || c.kind == kDatetime) {
			raw, err := c.rawTime(v)
			if err != nil {
				return nil, fmt.Errorf("mystream: %s.%s: %w", t.schema, t.name, err)
			}
			out[j] = raw
			continue
		}
		cv, err := c.convert(v)
		if err != nil {
			return nil, fmt.Errorf("mystream: %s.%s: %w", t.schema, t.name, err)
		}
		out[j] = cv
	}
	return out, nil
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

// Ack implements stream.Reader: the binlog is the server's, kept by its
// own expiry; nothing to free.
func (r *reader) Ack(stream.Pos) {}

// Close implements stream.Reader: the binlog connection is ended.
func (r *reader) Close() error {
	r.closeOnce.Do(func() {
		r.pollStop()
		r.syncer.Close()
		<-r.pollDone
	})
	return nil
}
