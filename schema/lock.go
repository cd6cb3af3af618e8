package schema

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// LockSQL is the setup lock's statements (a target dialect).
type LockSQL interface {
	SetupLock(name string) (string, []any)
	SetupUnlock(name string) (string, []any)
}

// LockWait is how long setup waits for another instance's setup.
const LockWait = 5 * time.Minute

// Lock takes the setup lock name on conn and returns its release. It is
// tried every 100ms until granted, for up to LockWait: a wait in one
// statement would be ended by the session's statement timeout (half the
// lease TTL) while another instance's setup runs.
func Lock(ctx context.Context, conn *sql.Conn, d LockSQL, name string) (func() error, error) {
	q, args := d.SetupLock(name)
	for start := time.Now(); ; {
		var held sql.NullInt64
		if err := conn.QueryRowContext(ctx, q, args...).Scan(&held); err != nil {
			return nil, fmt.Errorf("target setup lock %q: %w", name, err)
		}
		if held.Int64 == 1 {
			break
		}
		if time.Since(start) > LockWait {
			return nil, fmt.Errorf("target setup lock %q: not granted (another instance has held it for %v)", name, LockWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() error {
		q, args := d.SetupUnlock(name)
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), q, args...); err != nil {
			return fmt.Errorf("target setup unlock %q: %w", name, err)
		}
		return nil
	}, nil
}
