package netfault

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// echoServer answers every line with the same line, on 127.0.0.1.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line through conn and reads it back within limit.
func roundTrip(t *testing.T, conn net.Conn, r *bufio.Reader, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	if err := conn.SetDeadline(start.Add(limit)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		t.Fatalf("echo %q", line)
	}
	return time.Since(start), err
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

func TestProxy_Faults(t *testing.T) {
	p, err := NewProxy("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if host, _, _ := net.SplitHostPort(p.Addr()); host != "127.0.0.1" {
		t.Fatalf("proxy listens on %s, want 127.0.0.1 only", p.Addr())
	}
	c, r := dial(t, p)
	if _, err := roundTrip(t, c, r, time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	t.Run("Slow", func(t *testing.T) {
		if err := p.Slow(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.remove("slow") }()
		if d, err := roundTrip(t, c, r, 2*time.Second); err != nil || d < 100*time.Millisecond {
			t.Errorf("a round trip took %v (%v), want at least the 100ms latency", d, err)
		}
	})

	t.Run("Hold and Release", func(t *testing.T) {
		if err := p.Hold(time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := roundTrip(t, c, r, 300*time.Millisecond); err == nil {
			t.Fatal("a held line came back")
		}
		h := p.Holding()
		seen := time.Now()
		if h.Bytes != 5 || h.Chunks != 1 || !h.Released.IsZero() {
			t.Errorf("holding %+v, want the 5 bytes of one line, not released", h)
		}
		time.Sleep(100 * time.Millisecond)
		releasing := time.Now()
		h, err := p.Release()
		if err != nil {
			t.Fatal(err)
		}
		// Held from before it was seen held until Release was called: by
		// the clock of the process, whatever the scheduling in between.
		if h.Bytes != 5 || h.First.After(seen) || h.Released.Before(releasing) {
			t.Errorf("released %+v, want 5 bytes held from before %v until after %v (Release)", h, seen, releasing)
		}
		// The late line arrives now, on the same connection.
		if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("after Release: %q, %v; want the held line delivered", line, err)
		}
	})

	t.Run("Cut and Heal", func(t *testing.T) {
		if err := p.Cut(); err != nil {
			t.Fatal(err)
		}
		if _, err := roundTrip(t, c, r, 300*time.Millisecond); err == nil {
			t.Fatal("a line crossed a cut")
		}
		nc, nr := dial(t, p)
		if _, err := roundTrip(t, nc, nr, 300*time.Millisecond); err == nil {
			t.Fatal("a new connection crossed a cut")
		}
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
		hc, hr := dial(t, p)
		if _, err := roundTrip(t, hc, hr, time.Second); err != nil {
			t.Fatalf("after Heal: %v", err)
		}
	})
}

func TestProxy_Reset(t *testing.T) {
	p, err := NewProxy("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	busy, br := dial(t, p)
	idle, ir := dial(t, p)
	for _, c := range []struct {
		c net.Conn
		r *bufio.Reader
	}{{busy, br}, {idle, ir}} {
		if _, err := roundTrip(t, c.c, c.r, time.Second); err != nil {
			t.Fatalf("through the proxy: %v", err)
		}
	}

	const d = time.Second
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- p.Reset(d) }()
	for p.p.Toxics.GetToxic("reset_downstream") == nil {
		select {
		case err := <-done:
			t.Fatalf("Reset returned %v before its toxics were seen", err)
		case <-time.After(time.Millisecond):
		}
	}

	// A connection open before the reset breaks on its next exchange.
	if _, err := roundTrip(t, busy, br, 500*time.Millisecond); err == nil {
		t.Error("a line crossed a reset on a connection opened before it")
	}
	// One opened during the reset is reset by a TCP RST.
	nc, nr := dial(t, p)
	if _, err := roundTrip(t, nc, nr, 500*time.Millisecond); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a connection opened during the reset got %v, want ECONNRESET", err)
	}
	if time.Since(start) >= d {
		t.Fatalf("the checks took %v, longer than the reset: too slow to tell", time.Since(start))
	}

	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("Reset returned after %v, want at least %v", el, d)
	}
	if n := len(p.p.Toxics.GetToxicArray()); n != 0 {
		t.Errorf("%d toxics left after Reset", n)
	}
	// New connections work again, and so does one left idle all along.
	hc, hr := dial(t, p)
	if _, err := roundTrip(t, hc, hr, time.Second); err != nil {
		t.Errorf("after Reset: %v", err)
	}
	if _, err := roundTrip(t, idle, ir, time.Second); err != nil {
		t.Errorf("a connection idle during the reset: %v", err)
	}
}

func TestProxy_SlowZeroEnds(t *testing.T) {
	p, err := NewProxy("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)
	// The proxy's toxics tell what delays it applies; a round trip on a
	// loaded machine can take longer than them, never shorter.
	latencies := func() []int64 {
		var out []int64
		for _, x := range p.p.Toxics.GetToxicArray() {
			w, ok := x.(*toxics.ToxicWrapper)
			if !ok {
				t.Fatalf("toxic %T", x)
			}
			l, ok := w.Toxic.(*toxics.LatencyToxic)
			if !ok || w.Name != "slow" || w.Stream != "downstream" {
				t.Fatalf("toxic %s (%s, %T) besides Slow's", w.Name, w.Stream, w.Toxic)
			}
			out = append(out, l.Latency)
		}
		return out
	}
	for _, d := range []time.Duration{300 * time.Millisecond, 100 * time.Millisecond} {
		if err := p.Slow(d); err != nil {
			t.Fatalf("Slow(%v): %v", d, err)
		}
		if got := latencies(); len(got) != 1 || got[0] != d.Milliseconds() {
			t.Errorf("after Slow(%v) the proxy delays by %v ms, want %d alone (it replaces the earlier delay)", d, got, d.Milliseconds())
		}
		if el, err := roundTrip(t, c, r, 2*time.Second); err != nil || el < d {
			t.Errorf("after Slow(%v) a round trip took %v (%v)", d, el, err)
		}
	}
	if err := p.Slow(0); err != nil {
		t.Fatal(err)
	}
	if got := latencies(); len(got) != 0 {
		t.Errorf("after Slow(0) the proxy still delays by %v ms", got)
	}
	if _, err := roundTrip(t, c, r, time.Second); err != nil {
		t.Errorf("after Slow(0) a round trip failed: %v", err)
	}
	if err := p.Slow(0); err != nil {
		t.Errorf("Slow(0) without a delay: %v", err)
	}
}
