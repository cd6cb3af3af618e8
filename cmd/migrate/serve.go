package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/migrate-dev/migrate/metrics"
)

// shutdownTimeout bounds the graceful shutdown of the HTTP server.
const shutdownTimeout = 5 * time.Second

// serveHTTP listens on addr (host:port; port 0 picks one) and serves the
// run's HTTP endpoints — /metrics today, beside which a status page can be
// mounted — until ctx ends, then shuts the server down gracefully in the
// background. It returns the bound address, or the listen error (such as
// address in use).
func serveHTTP(ctx context.Context, addr string, m *metrics.Metrics) (net.Addr, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: serve on %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // returns http.ErrServerClosed after Shutdown
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}
