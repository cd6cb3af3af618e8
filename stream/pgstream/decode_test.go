package pgstream

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/jackc/pglogrepl"
)

// tupleBytes encodes a TupleData: nil is a null, "\x00u" an unchanged
// TOAST value, anything else a text value.
func tupleBytes(vals ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(vals)))
	for _, v := range vals {
		switch {
		case v == nil:
			b = append(b, 'n')
		case string(v) == "\x00u":
			b = append(b, 'u')
		default:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// rowMessages are messages of every shape rowMessage decodes.
func rowMessages() map[string][]byte {
	rel := binary.BigEndian.AppendUint32(nil, 16385)
	msg := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	newT := tupleBytes([]byte("42"), nil, []byte("héllo\tworld"), []byte("\x00u"), []byte(""))
	oldKey := tupleBytes([]byte("41"), nil, nil, nil, nil)
	oldRow := tupleBytes([]byte("41"), []byte("x"), []byte("old"), []byte("big"), []byte("e"))
	return map[string][]byte{
		"insert":          msg([]byte("I"), rel, []byte("N"), newT),
		"update":          msg([]byte("U"), rel, []byte("N"), newT),
		"update, old key": msg([]byte("U"), rel, []byte("K"), oldKey, []byte("N"), newT),
		"update, old row": msg([]byte("U"), rel, []byte("O"), oldRow, []byte("N"), newT),
		"delete, key":     msg([]byte("D"), rel, []byte("K"), oldKey),
		"delete, old row": msg([]byte("D"), rel, []byte("O"), oldRow),
	}
}

// TestRowMessage_likePglogrepl: the hand decoder reads every shape of row
// message as pglogrepl.Parse does.
func TestRowMessage_likePglogrepl(t *testing.T) {
	var m rowMessage
	for name, data := range rowMessages() {
		if err := m.decode(data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msg, err := parse(data)
		if err != nil {
			t.Fatalf("%s: pglogrepl: %v", name, err)
		}
		var rel uint32
		var oldKind byte
		var old, new *pglogrepl.TupleData
		switch p := msg.(type) {
		case *pglogrepl.InsertMessage:
			rel, new = p.RelationID, p.Tuple
		case *pglogrepl.UpdateMessage:
			rel, oldKind, old, new = p.RelationID, p.OldTupleType, p.OldTuple, p.NewTuple
		case *pglogrepl.DeleteMessage:
			rel, oldKind, old = p.RelationID, p.OldTupleType, p.OldTuple
		}
		if m.relation != rel || m.oldKind != oldKind || byte(m.op) != data[0] {
			t.Errorf("%s: relation %d, old %q, op %q; pglogrepl: %d, %q", name, m.relation, m.oldKind, m.op, rel, oldKind)
		}
		same := func(what string, got []col, want *pglogrepl.TupleData) {
			if want == nil {
				if len(got) != 0 {
					t.Errorf("%s: %s: %d columns, pglogrepl none", name, what, len(got))
				}
				return
			}
			if len(got) != len(want.Columns) {
				t.Fatalf("%s: %s: %d columns, pglogrepl %d", name, what, len(got), len(want.Columns))
			}
			for i, c := range want.Columns {
				if got[i].kind != c.DataType || !bytes.Equal(got[i].data, c.Data) {
					t.Errorf("%s: %s column %d: %q %q, pglogrepl %q %q", name, what, i, got[i].kind, got[i].data, c.DataType, c.Data)
				}
			}
		}
		same("old", m.old, old)
		same("new", m.new, new)
	}
}

// TestRowMessage_malformed: every message cut short, or with a byte
// changed, is an error or a message, never a panic or a read past its end.
func TestRowMessage_malformed(t *testing.T) {
	var m rowMessage
	for name, data := range rowMessages() {
		for n := range len(data) {
			if err := m.decode(data[:n:n]); err == nil {
				t.Errorf("%s cut to %d of %d bytes: decoded", name, n, len(data))
			}
		}
		for i := range data {
			for _, b := range []byte{0, 'K', 'N', 'O', 'n', 't', 'u', 0x7f, 0xff} {
				bad := bytes.Clone(data)
				bad[i] = b
				_ = m.decode(bad[:len(bad):len(bad)])
			}
		}
		if err := m.decode(append(bytes.Clone(data), 0)); err == nil {
			t.Errorf("%s with a byte more: decoded", name)
		}
	}
}

// FuzzRowMessage: no input makes the decoder panic.
func FuzzRowMessage(f *testing.F) {
	for _, data := range rowMessages() {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m rowMessage
		_ = m.decode(data)
	})
}
