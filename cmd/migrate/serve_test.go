package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/metrics"
)

func TestServeHTTP_metrics(t *testing.T) {
	m := metrics.New("p")
	m.SetState("t", 0, "running")
	addr, err := serveHTTP(t.Context(), "127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `migrate_shard_state{plan="p",shard="0",state="running",table="t"} 1`) {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
}

func TestServeHTTP_addressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr, err := serveHTTP(t.Context(), ln.Addr().String(), metrics.New("p"))
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "metrics: serve on") {
		t.Fatalf("serveHTTP on a used address = %v, %v; want an address in use error", addr, err)
	}
}

func TestServeHTTP_shutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	addr, err := serveHTTP(ctx, "127.0.0.1:0", metrics.New("p"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			return // closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still listening 5s after ctx ended")
		}
	}
}
