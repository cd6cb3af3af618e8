// Package netfault is a fault-injecting TCP proxy (toxiproxy, run in this
// process): the network faults of drills and tests — a partition, a slow
// link, connections reset, writes held back and delivered late.
package netfault

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// Proxy is a fault-injecting TCP proxy on 127.0.0.1 in front of one service
// (toxiproxy, run in this process). Faults apply to the connections open
// through it and to those opened later. A nil *Proxy is no proxy: Addr is
// "", and Cut, Heal and Close do nothing.
type Proxy struct {
	p    *toxiproxy.Proxy
	mu   sync.Mutex
	late *lateToxic
}

// lateType names the toxic of Proxy.Hold in toxiproxy's registry.
const lateType = "migrate_drill_late"

func init() { toxics.Register(lateType, new(lateToxic)) }

// NewProxy starts a proxy on a free 127.0.0.1 port forwarding to upstream
// (host:port).
func NewProxy(name, upstream string) (*Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("netfault: proxy %s: %w", name, err)
	}
	return &Proxy{p: p}, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string {
	if p == nil {
		return ""
	}
	return p.p.Listen
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	if p != nil {
		p.p.Stop()
	}
}

func (p *Proxy) add(name, typ, dir string, attrs string) (*toxics.ToxicWrapper, error) {
	w, err := p.p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name": %q, "type": %q, "stream": %q, "attributes": %s}`, name, typ, dir, attrs)))
	if err != nil {
		return nil, fmt.Errorf("netfault: proxy %s: add %s: %w", p.p.Name, name, err)
	}
	return w, nil
}

func (p *Proxy) remove(name string) error {
	if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("netfault: proxy %s: remove %s: %w", p.p.Name, name, err)
	}
	return nil
}

// Slow delays every response from the upstream by d: each round trip of a
// client through the proxy takes d longer. It replaces the delay of an
// earlier Slow; Slow(0) ends it (responses held back meanwhile go on at
// once).
func (p *Proxy) Slow(d time.Duration) error {
	if p.p.Toxics.GetToxic("slow") != nil {
		if err := p.remove("slow"); err != nil {
			return err
		}
	}
	if d <= 0 {
		return nil
	}
	_, err := p.add("slow", "latency", "downstream", fmt.Sprintf(`{"latency": %d}`, d.Milliseconds()))
	return err
}

// Reset resets, for d, every connection through the proxy that carries a
// byte in either direction, and every connection opened meanwhile, as a
// crashing middlebox or a peer that restarted does (toxiproxy's
// reset_peer); then it ends, and connections opened afterwards work. It
// returns after d. Connections opened during d are reset with a TCP RST;
// those open before it are closed at once, mid-exchange, as toxiproxy
// cannot set their linger option any more. A connection idle for all of d
// is left alone.
func (p *Proxy) Reset(d time.Duration) error {
	var added []string
	defer func() {
		for _, name := range added {
			_ = p.remove(name)
		}
	}()
	for _, dir := range []string{"upstream", "downstream"} {
		if _, err := p.add("reset_"+dir, "reset_peer", dir, `{"timeout": 0}`); err != nil {
			return err
		}
		added = append(added, "reset_"+dir)
	}
	time.Sleep(d)
	var err error
	for _, name := range added {
		if e := p.remove(name); e != nil && err == nil {
			err = e
		}
	}
	added = nil
	return err
}

// Cut drops everything in both directions without closing a connection, as
// a network partition does; new connections are accepted and hang.
func (p *Proxy) Cut() error {
	if p == nil {
		return nil
	}
	for _, dir := range []string{"upstream", "downstream"} {
		if _, err := p.add("cut_"+dir, "timeout", dir, `{"timeout": 0}`); err != nil {
			return err
		}
	}
	return nil
}

// Heal ends a Cut. Bytes dropped meanwhile are lost: the clients' open
// connections are broken and they reconnect.
func (p *Proxy) Heal() error {
	if p == nil {
		return nil
	}
	for _, dir := range []string{"upstream", "downstream"} {
		if err := p.remove("cut_" + dir); err != nil {
			return err
		}
	}
	return nil
}

// Hold delays every byte sent to the upstream until Release, or at most
// limit: a late write waits in the proxy.
func (p *Proxy) Hold(limit time.Duration) error {
	w, err := p.add("late", lateType, "upstream", fmt.Sprintf(`{"latency": %d}`, limit.Milliseconds()))
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.late = w.Toxic.(*lateToxic)
	p.mu.Unlock()
	return nil
}

// Held is what a Hold kept back.
type Held struct {
	Bytes, Chunks int64
	First         time.Time // when the first byte was held; zero if none
	Released      time.Time // when the last chunk held went on to the upstream
}

// Holding reports what Hold has kept back so far.
func (p *Proxy) Holding() Held {
	p.mu.Lock()
	t := p.late
	p.mu.Unlock()
	if t == nil {
		return Held{}
	}
	return t.stats()
}

// Release delivers what Hold kept back and ends it; it reports what was
// held.
func (p *Proxy) Release() (Held, error) {
	err := p.remove("late")
	p.mu.Lock()
	t := p.late
	p.mu.Unlock()
	if t == nil {
		return Held{}, err
	}
	return t.stats(), err
}

// lateToxic passes data on after Latency milliseconds, or at once when it is
// removed (toxiproxy interrupts it), counting what it held.
type lateToxic struct {
	Latency int64 `json:"latency"`

	mu   sync.Mutex
	held Held
}

// Pipe implements toxics.Toxic.
func (t *lateToxic) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			t.hold(c)
			wait := time.Duration(t.Latency)*time.Millisecond - time.Since(c.Timestamp)
			select {
			case <-time.After(wait):
			case <-stub.Interrupt:
				t.release(c)
				stub.Output <- c // removed: deliver it, never drop it
				return
			}
			t.release(c)
			stub.Output <- c
		}
	}
}

func (t *lateToxic) hold(c *stream.StreamChunk) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held.Chunks == 0 {
		t.held.First = time.Now()
	}
	t.held.Chunks++
	t.held.Bytes += int64(len(c.Data))
}

func (t *lateToxic) release(*stream.StreamChunk) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held.Released = time.Now()
}

func (t *lateToxic) stats() Held {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}
