package pgstream

import (
	"context"
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

// tuple decodes a tuple: its values, which columns were sent (not 'u'),
// and which were unchanged TOAST values ('u').
func (r *relation) tuple(td *pglogrepl.TupleData) (vals []any, sent, unchanged []bool, err error) {
	if td == nil || len(td.Columns) != len(r.columns) {
		n := 0
		if td != nil {
			n = len(td.Columns)
		}
		return nil, nil, nil, fmt.Errorf("pgstream: a row of %s has %d columns, its relation %d; the table changed shape while streaming: copy it again", r.name(), n, len(r.columns))
	}
	vals = make([]any, len(r.columns))
	sent = make([]bool, len(r.columns))
	for i, c := range td.Columns {
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
			sent[i] = true
		case pglogrepl.TupleDataTypeToast:
			if unchanged == nil {
				unchanged = make([]bool, len(r.columns))
			}
			unchanged[i] = true
		case pglogrepl.TupleDataTypeText:
			v, err := r.values[i](c.Data)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("pgstream: column %s of %s: decode %q: %w", r.columns[i], r.name(), excerpt(c.Data), err)
			}
			vals[i], sent[i] = v, true
		default:
			return nil, nil, nil, fmt.Errorf("pgstream: column %s of %s: unexpected tuple data kind %q (the stream is read in text)", r.columns[i], r.name(), c.DataType)
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
func (r *relation) old(kind uint8, td *pglogrepl.TupleData) ([]any, []bool, error) {
	vals, sent, _, err := r.tuple(td)
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

func (r *relation) change(op stream.Op) stream.Change {
	return stream.Change{Schema: r.schema, Table: r.table, Op: op, Columns: r.columns}
}

// insert, update and del turn pgoutput's row messages into changes.
func (r *relation) insert(msg *pglogrepl.InsertMessage) (stream.Change, error) {
	c := r.change(stream.Insert)
	var err error
	c.New, _, c.Unchanged, err = r.tuple(msg.Tuple)
	return c, err
}

// update's Old is the old key or row when the server sent one (a changed
// key, or REPLICA IDENTITY FULL); otherwise the key did not change and Old
// holds the key columns of New.
func (r *relation) update(msg *pglogrepl.UpdateMessage) (stream.Change, error) {
	c := r.change(stream.Update)
	var err error
	c.New, _, c.Unchanged, err = r.tuple(msg.NewTuple)
	if err != nil {
		return c, err
	}
	if msg.OldTuple != nil {
		c.Old, c.OldHas, err = r.old(msg.OldTupleType, msg.OldTuple)
		return c, err
	}
	c.Old, c.OldHas = make([]any, len(r.columns)), make([]bool, len(r.columns))
	for i, k := range r.key {
		if k && (c.Unchanged == nil || !c.Unchanged[i]) {
			c.Old[i], c.OldHas[i] = c.New[i], true
		}
	}
	return c, nil
}

func (r *relation) del(msg *pglogrepl.DeleteMessage) (stream.Change, error) {
	c := r.change(stream.Delete)
	var err error
	c.Old, c.OldHas, err = r.old(msg.OldTupleType, msg.OldTuple)
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
