package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/migrate-dev/migrate/metrics"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/status"
)

// shutdownTimeout bounds the graceful shutdown of the HTTP server.
const shutdownTimeout = 5 * time.Second

// statusPool is the connections to the target of a status page's reader:
// a page reads one query at a time, and the run's own work must not wait
// for a browser.
const statusPool = 2

// serveHTTP listens on addr (host:port; port 0 picks one) and serves the
// run's HTTP endpoints — /metrics, and the status page (/ and
// /status.json) when page is not nil — until ctx ends, then shuts the
// server down gracefully in the background. It returns the bound address,
// or the listen error (such as address in use).
func serveHTTP(ctx context.Context, addr string, m *metrics.Metrics, page http.Handler) (net.Addr, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	if page != nil {
		mux.Handle("/", page)
	}
	bound, _, err := listenHTTP(ctx, addr, mux)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return bound, nil
}

// listenHTTP listens on addr and serves h until ctx ends, then shuts the
// server down gracefully; done is closed once it has. It returns the bound
// address.
func listenHTTP(ctx context.Context, addr string, h http.Handler) (bound net.Addr, done <-chan struct{}, err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("serve on %q: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // returns http.ErrServerClosed after Shutdown
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), shut, nil
}

// errRunEnded answers a status page read after its run ended.
var errRunEnded = errors.New("the run has ended; `migrate status -p PLAN --serve ADDR` serves this page without one")

// runStatus is the status page's reader in `migrate run --metrics-addr`:
// `migrate status`'s, on a plan of its own (the run resolves its plan's
// tables and splits `shards: auto` ones in place) and a small pool, opened
// at the first request — a page nobody looks at costs nothing, and a
// reader that cannot open fails the page, never the run — and closed when
// the run ends.
type runStatus struct {
	plan *plans.Plan
	log  *slog.Logger

	mu     sync.RWMutex // held to read; exclusively to open and close
	rd     *status.Reader
	close  func()
	closed bool
}

// newRunStatus loads the plan again for the status page of a run.
func newRunStatus(pf *planFlags, log *slog.Logger) (*runStatus, error) {
	plan, err := pf.load()
	if err != nil {
		return nil, err
	}
	return &runStatus{plan: plan, log: log}, nil
}

// Read reads the plan's state, opening the reader first if needed.
func (s *runStatus) Read(ctx context.Context) (*status.Status, error) {
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errRunEnded
	}
	return s.rd.Read(ctx)
}

// open opens the reader unless it is open.
func (s *runStatus) open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errRunEnded
	case s.rd != nil:
		return nil
	}
	rd, closeRd, err := openStatus(ctx, s.plan, s.log)
	if err != nil {
		return err
	}
	rd.Target.SetMaxOpenConns(statusPool)
	s.rd, s.close = rd, closeRd
	return nil
}

// Close closes the reader, after the reads under way.
func (s *runStatus) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.close != nil {
		s.close()
	}
	s.closed = true
}
