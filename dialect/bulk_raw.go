package dialect

import (
	"context"
	"database/sql"
)

// RawPage is a page of source rows already in the target's binary bulk
// format, never decoded: the tuples, each with the token last, and the key
// of every row (the cursor's, wherever the page is cut).
type RawPage struct {
	Data []byte  // the tuples, in key order
	Ends []int   // rows 0..i are Data[:Ends[i]]
	Keys [][]any // each row's key, as the keyset reader gives it
}

// Len is the page's rows.
func (p RawPage) Len() int { return len(p.Ends) }

// Head is the page's first n rows.
func (p RawPage) Head(n int) RawPage {
	if n == 0 {
		return RawPage{}
	}
	return RawPage{Data: p.Data[:p.Ends[n-1]], Ends: p.Ends[:n], Keys: p.Keys[:n]}
}

// Tail is the page after its first n rows.
func (p RawPage) Tail(n int) RawPage {
	if n == 0 {
		return p
	}
	cut := p.Ends[n-1]
	ends := make([]int, len(p.Ends)-n)
	for i, e := range p.Ends[n:] {
		ends[i] = e - cut
	}
	return RawPage{Data: p.Data[cut:], Ends: ends, Keys: p.Keys[n:]}
}

// Last is the key of the page's last row (nil for an empty page).
func (p RawPage) Last() []any {
	if len(p.Keys) == 0 {
		return nil
	}
	return p.Keys[len(p.Keys)-1]
}

// RawCopier is a dialect that moves rows between two databases of its own
// engine without decoding them: the source's binary result rows become
// the target's binary bulk rows as they are (PostgreSQL's send and receive
// forms are the same bytes). Passthrough, called on the target's dialect
// with the source's (each as its server was detected), tells whether a
// table can: every column of one of the types whose binary form is the
// same in any database of the two servers — fewer types when their
// versions differ —, the same type on both sides, and a key the reader can
// decode. ReadRaw runs a keyset page query (args bound) on db and encodes
// its rows with token; keyIdx are the key's columns among the selected
// ones. LoadRaw sends a page into the transaction open on conn; a row
// that exists after all is ErrConflict.
type RawCopier interface {
	Passthrough(from Dialect, src, dst []Column, key []string) bool
	ReadRaw(ctx context.Context, db *sql.DB, query string, args []any, keyIdx []int, token int64, hint int) (RawPage, error)
	LoadRaw(ctx context.Context, conn *sql.Conn, table []string, cols []Column, fence string, page RawPage) error
}
