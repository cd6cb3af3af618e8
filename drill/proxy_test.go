package drill

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
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
		if h := p.Holding(); h.Bytes != 5 || h.Chunks != 1 || !h.Released.IsZero() {
			t.Errorf("holding %+v, want the 5 bytes of one line, not released", h)
		}
		time.Sleep(100 * time.Millisecond)
		h, err := p.Release()
		if err != nil {
			t.Fatal(err)
		}
		// Held through the 300ms wait and the 100ms sleep, less the time
		// the line took to reach the proxy (First is stamped there).
		if h.Bytes != 5 || h.Released.Sub(h.First) < 350*time.Millisecond {
			t.Errorf("released %+v, want 5 bytes held about 400ms", h)
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
