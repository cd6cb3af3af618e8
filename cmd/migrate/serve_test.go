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
	"github.com/migrate-dev/migrate/status"
)

func TestServeHTTP_metrics(t *testing.T) {
	m := metrics.New("p")
	m.SetState("t", 0, "running")
	addr, err := serveHTTP(t.Context(), "127.0.0.1:0", m, nil)
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
	addr, err := serveHTTP(t.Context(), ln.Addr().String(), metrics.New("p"), nil)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "metrics: serve on") {
		t.Fatalf("serveHTTP on a used address = %v, %v; want an address in use error", addr, err)
	}
}

func TestServeHTTP_shutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	addr, err := serveHTTP(ctx, "127.0.0.1:0", metrics.New("p"), nil)
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

// TestServeHTTP_statusPage: the status page is served beside /metrics on
// the same listener, read-only.
func TestServeHTTP_statusPage(t *testing.T) {
	m := metrics.New("p")
	m.SetState("t", 0, "running")
	page := &status.Page{Plan: "p", Read: func(context.Context) (*status.Status, error) {
		return &status.Status{Plan: "p", Tables: []status.ShardStatus{{Table: "t", State: "running", RowsDone: 42, LastKey: []byte("42"), LastTakeover: []byte("null")}},
			Totals: []status.TableTotal{{Table: "t", Target: "t", Shards: 1, ShardsRunning: 1, RowsDone: 42}}}, nil
	}}
	addr, err := serveHTTP(t.Context(), "127.0.0.1:0", m, page)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for path, want := range map[string]string{
		"/metrics":     `migrate_shard_state{plan="p",shard="0",state="running",table="t"} 1`,
		"/":            `data-key="rows_done" data-table="t" data-shard="0" data-value="42"`,
		"/status.json": `"rows_done": 42`,
	} {
		resp, err := c.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s, want %q in\n%s", path, resp.Status, want, body)
		}
	}
	resp, err := c.Post("http://"+addr.String()+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %s, want 405", resp.Status)
	}
}
