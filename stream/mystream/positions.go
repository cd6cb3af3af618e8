package mystream

import (
	"context"
	"fmt"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/migrate-dev/migrate/stream"
)

// Current implements stream.Capture: the server's newest position, in the
// form Start gives (a GTID set, or the binlog's file and offset).
func (c *Capture) Current(ctx context.Context) (stream.Pos, error) {
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

// Covers implements stream.Capture: a GTID set covers another it contains;
// a file position one at or before it (binlog names sort in their order).
// A GTID position and a file position do not compare.
func (c *Capture) Covers(have, want stream.Pos) (bool, error) {
	h, err := parsePos(have)
	if err != nil {
		return false, err
	}
	w, err := parsePos(want)
	if err != nil {
		return false, err
	}
	switch {
	case h.gtid != "" && w.gtid != "":
		_, flavor, err := c.pool(context.Background())
		if err != nil {
			return false, err
		}
		hs, err := gomysql.ParseGTIDSet(flavor, h.gtid)
		if err != nil {
			return false, fmt.Errorf("mystream: position %s: %w", have, err)
		}
		ws, err := gomysql.ParseGTIDSet(flavor, w.gtid)
		if err != nil {
			return false, fmt.Errorf("mystream: position %s: %w", want, err)
		}
		return hs.Contain(ws), nil
	case h.gtid == "" && w.gtid == "":
		return h.file > w.file || h.file == w.file && h.off >= w.off, nil
	}
	return false, fmt.Errorf("mystream: positions %s and %s do not compare (one is a GTID set)", have, want)
}
