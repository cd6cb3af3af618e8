package lock

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// idle is a Backend that is never asked anything: New only checks and
// fills in options. Every backend's behaviour is tested against its real
// service by the conformance suite (lock/locktest).
type idle struct{ Backend }

func TestNew(t *testing.T) {
	var b idle
	t.Run("defaults", func(t *testing.T) {
		l, err := New(b, Options{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o := l.Options()
		want := Options{TTL: 3 * time.Second, RenewEvery: time.Second, Drift: 30 * time.Millisecond,
			Margin: 300 * time.Millisecond, PollEvery: 300 * time.Millisecond}
		if o.RenewEvery != want.RenewEvery || o.Drift != want.Drift || o.Margin != want.Margin || o.PollEvery != want.PollEvery {
			t.Errorf("options = %+v, want %+v", o, want)
		}
		if o.Logger == nil {
			t.Error("nil logger")
		}
	})
	t.Run("drift and poll are clamped", func(t *testing.T) {
		l, err := New(b, Options{TTL: time.Second, Drift: time.Millisecond, PollEvery: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if o := l.Options(); o.Drift != 10*time.Millisecond || o.PollEvery != 100*time.Millisecond {
			t.Errorf("drift %v poll %v, want 10ms and 100ms", o.Drift, o.PollEvery)
		}
	})
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"no TTL", Options{}},
		{"tiny TTL", Options{TTL: time.Millisecond}},
		{"renew after deadline", Options{TTL: time.Second, RenewEvery: 900 * time.Millisecond}},
		{"negative renew", Options{TTL: time.Second, RenewEvery: -time.Second}},
		{"negative margin", Options{TTL: time.Second, Margin: -time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(b, tc.opts); err == nil {
				t.Errorf("New(%+v) accepted", tc.opts)
			}
		})
	}
	if _, err := New(nil, Options{TTL: time.Second}); err == nil {
		t.Error("a nil backend accepted")
	}
	l, _ := New(b, Options{TTL: time.Second})
	if _, err := l.Acquire(context.Background(), "", "a"); err == nil {
		t.Error("an empty lease name accepted")
	}
}

func TestNewOwnerID(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9._-]+-[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for _, in := range []string{"node-1", "", "a b/c:d", strings.Repeat("x", 200), "node-1"} {
		id := NewOwnerID(in)
		if !re.MatchString(id) {
			t.Errorf("NewOwnerID(%q) = %q", in, id)
		}
		if len(id) > 64+1+32 {
			t.Errorf("NewOwnerID(%q) too long: %d", in, len(id))
		}
		if seen[id] {
			t.Errorf("NewOwnerID(%q) repeated %q", in, id)
		}
		seen[id] = true
	}
	if id := NewOwnerID("a b"); !strings.HasPrefix(id, "a_b-") {
		t.Errorf("not sanitised: %q", id)
	}
}
