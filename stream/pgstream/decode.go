package pgstream

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/migrate-dev/migrate/stream"
)

// relation is a table as pgoutput's Relation message described it.
type relation struct {
	schema, table string
	columns       []string
	key           []bool // part of the replica identity
	values        []valueFunc
}

// baseType resolves a type the type map does not know: a domain's base
// type (what the server reports for a domain column when the pool reads
// it), or the type itself.
type baseType func(oid uint32) (uint32, error)

// newRelation builds the relation of a Relation message.
func newRelation(m *pgtype.Map, msg *pglogrepl.RelationMessage, base baseType) (*relation, error) {
	r := &relation{
		schema:  msg.Namespace,
		table:   msg.RelationName,
		columns: make([]string, len(msg.Columns)),
		key:     make([]bool, len(msg.Columns)),
		values:  make([]valueFunc, len(msg.Columns)),
	}
	for i, c := range msg.Columns {
		r.columns[i] = c.Name
		r.key[i] = c.Flags&1 != 0
		oid := c.DataType
		if _, ok := m.TypeForOID(oid); !ok {
			b, err := base(oid)
			if err != nil {
				return nil, fmt.Errorf("pgstream: the type of column %s of %s.%s: %w", c.Name, r.schema, r.table, err)
			}
			oid = b
		}
		r.values[i] = valueFor(m, oid)
	}
	return r, nil
}

func (r *relation) name() string { return r.schema + "." + r.table }

// col is one column of a pgoutput TupleData: its kind (pglogrepl's
// TupleDataType: 'n' null, 'u' unchanged TOAST value, 't' text, 'b'
// binary) and, for 't' and 'b', its bytes.
type col struct {
	kind byte
	data []byte
}

// rowMessage is an Insert, Update or Delete message of pgoutput (protocol
// version 1), decoded without copying its values: they alias the
// message's bytes, which the connection reuses for the next message, and
// are turned into Go values (which copy) before it is received. The
// slices are reused from one message to the next.
type rowMessage struct {
	op       stream.Op
	relation uint32
	oldKind  byte // 'K' (the replica identity's columns) or 'O' (the whole row); 0: no old tuple
	old, new []col
}

// isRow reports whether a pgoutput message is a row change.
func isRow(data []byte) bool {
	return len(data) > 0 && (data[0] == 'I' || data[0] == 'U' || data[0] == 'D')
}

// decode decodes an Insert, Update or Delete message: "I" relation "N"
// tuple; "U" relation ["K"|"O" tuple] "N" tuple; "D" relation "K"|"O"
// tuple (a tuple is a column count, then each column's kind and, for text
// and binary, its length and bytes).
func (m *rowMessage) decode(src []byte) error {
	if len(src) < 6 {
		return fmt.Errorf("malformed pgoutput row message: %d bytes", len(src))
	}
	m.op, m.relation, m.oldKind = stream.Op(src[0]), binary.BigEndian.Uint32(src[1:5]), 0
	m.old, m.new = m.old[:0], m.new[:0]
	p := 5
	var err error
	if m.op != stream.Insert && (src[p] == 'K' || src[p] == 'O') {
		m.oldKind = src[p]
		if m.old, p, err = tupleData(src, p+1, m.old); err != nil {
			return err
		}
	}
	switch {
	case m.op == stream.Delete && m.oldKind != 0 && p == len(src):
		return nil
	case m.op != stream.Delete && p < len(src) && src[p] == 'N':
		m.new, p, err = tupleData(src, p+1, m.new)
		if err == nil && p != len(src) {
			err = fmt.Errorf("malformed pgoutput %s message: %d bytes after its tuple", m.op, len(src)-p)
		}
		return err
	}
	return fmt.Errorf("malformed pgoutput %s message: unexpected tuple at byte %d", m.op, p)
}

// tupleData appends the columns of the TupleData at src[p:] to cols and
// returns them and the offset after it.
func tupleData(src []byte, p int, cols []col) ([]col, int, error) {
	short := func() ([]col, int, error) {
		return cols, p, fmt.Errorf("malformed pgoutput tuple: %d bytes end in its middle", len(src))
	}
	if p+2 > len(src) {
		return short()
	}
	n := int(binary.BigEndian.Uint16(src[p:]))
	p += 2
	for range n {
		if p >= len(src) {
			return short()
		}
		kind := src[p]
		p++
		switch kind {
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
			cols = append(cols, col{kind: kind})
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if p+4 > len(src) {
				return short()
			}
			l := int(binary.BigEndian.Uint32(src[p:]))
			p += 4
			if l < 0 || l > len(src)-p {
				return short()
			}
			cols = append(cols, col{kind: kind, data: src[p : p+l : p+l]})
			p += l
		default:
			return cols, p, fmt.Errorf("malformed pgoutput tuple: column kind %q", kind)
		}
	}
	return cols, p, nil
}

// tuple decodes a tuple: its values, which columns were sent (not 'u'),
// and which were unchanged TOAST values ('u').
func (r *relation) tuple(cols []col) (vals []any, sent, unchanged []bool, err error) {
	if len(cols) != len(r.columns) {
		return nil, nil, nil, fmt.Errorf("pgstream: a row of %s has %d columns, its relation %d; the table changed shape while streaming: copy it again", r.name(), len(cols), len(r.columns))
	}
	vals = make([]any, len(r.columns))
	sent = make([]bool, len(r.columns))
	for i, c := range cols {
		switch c.kind {
		case pglogrepl.TupleDataTypeNull:
			sent[i] = true
		case pglogrepl.TupleDataTypeToast:
			if unchanged == nil {
				unchanged = make([]bool, len(r.columns))
			}
			unchanged[i] = true
		case pglogrepl.TupleDataTypeText:
			v, err := r.values[i](c.data)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("pgstream: column %s of %s: decode %q: %w", r.columns[i], r.name(), excerpt(c.data), err)
			}
			vals[i], sent[i] = v, true
		default:
			return nil, nil, nil, fmt.Errorf("pgstream: column %s of %s: unexpected tuple data kind %q (the stream is read in text)", r.columns[i], r.name(), c.kind)
		}
	}
	return vals, sent, unchanged, nil
}

func excerpt(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// old decodes an old tuple: 'K' sends the replica identity's columns (the
// others come as nulls and are not Old's), 'O' the whole row.
func (r *relation) old(kind uint8, cols []col) ([]any, []bool, error) {
	vals, sent, _, err := r.tuple(cols)
	if err != nil {
		return nil, nil, err
	}
	if kind == 'K' {
		for i := range sent {
			if !r.key[i] {
				sent[i], vals[i] = false, nil
			}
		}
	}
	return vals, sent, nil
}

// change turns a row message of the relation into a change. An update's
// Old is the old key or row when the server sent one (a changed key, or
// REPLICA IDENTITY FULL); otherwise the key did not change and Old holds
// the key columns of New.
func (r *relation) change(m *rowMessage) (stream.Change, error) {
	c := stream.Change{Schema: r.schema, Table: r.table, Op: m.op, Columns: r.columns}
	var err error
	if m.op != stream.Delete {
		if c.New, _, c.Unchanged, err = r.tuple(m.new); err != nil {
			return c, err
		}
	}
	switch {
	case m.oldKind != 0:
		c.Old, c.OldHas, err = r.old(m.oldKind, m.old)
	case m.op == stream.Update:
		c.Old, c.OldHas = make([]any, len(r.columns)), make([]bool, len(r.columns))
		for i, k := range r.key {
			if k && (c.Unchanged == nil || !c.Unchanged[i]) {
				c.Old[i], c.OldHas[i] = c.New[i], true
			}
		}
	}
	return c, err
}

// parse decodes a pgoutput message; pglogrepl indexes without bounds
// checks, so a malformed message is an error, not a panic.
func parse(data []byte) (msg pglogrepl.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed pgoutput message: %v", p)
		}
	}()
	return pglogrepl.Parse(data)
}

// baseType resolves a domain to its base type, as the server does for the
// columns of a result; other types are returned as they are.
func (r *Reader) baseType(ctx context.Context, oid uint32) (uint32, error) {
	if r.db == nil {
		db, err := r.c.connect(ctx)
		if err != nil {
			return 0, err
		}
		r.db = db
	}
	for range 32 {
		var kind string
		var base uint32
		err := r.db.QueryRowContext(ctx, `SELECT typtype::text, typbasetype FROM pg_type WHERE oid = $1`, oid).Scan(&kind, &base)
		if err != nil {
			return 0, fmt.Errorf("read pg_type of type %d: %w", oid, err)
		}
		if kind != "d" {
			return oid, nil
		}
		oid = base
	}
	return 0, fmt.Errorf("type %d: domains nested too deep", oid)
}
