package mystream

import (
	"context"
	"time"

	"github.com/migrate-dev/migrate/stream"
)

// Behind implements stream.Reader: Seconds since the last event read's
// timestamp (0 once a heartbeat showed nothing more to read), Bytes from
// the read position to the server's, known while both are in one binlog.
func (r *reader) Behind() stream.Lag {
	r.mu.Lock()
	defer r.mu.Unlock()
	lag := stream.Lag{Bytes: -1}
	if r.masterKnown && r.masterFile == r.readFile && r.readFile != "" {
		lag.Bytes = max(int64(r.masterOff)-int64(r.readOff), 0)
	}
	if r.caughtUp {
		lag.Bytes = 0
		return lag
	}
	if !r.lastEvent.IsZero() {
		lag.Seconds = max(time.Since(r.lastEvent).Seconds(), 0)
	}
	return lag
}

// pollMaster keeps the server's binlog position for Behind, once per
// heartbeat period.
func (r *reader) pollMaster(ctx context.Context) {
	defer close(r.pollDone)
	t := time.NewTicker(r.hb)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		file, off, err := masterStatus(qctx, r.db)
		cancel()
		if err == nil {
			r.mu.Lock()
			r.masterFile, r.masterOff, r.masterKnown = file, off, true
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
