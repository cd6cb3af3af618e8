package notify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSign(t *testing.T) {
	t.Run("StandardWebhooksVector", func(t *testing.T) {
		// The known answer of the Standard Webhooks libraries' tests
		// (libraries/go/webhook_test.go, TestWebhookSign).
		key, err := Key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		if err != nil {
			t.Fatal(err)
		}
		got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
		if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
			t.Errorf("Sign = %s, want %s", got, want)
		}
	})
	t.Run("PlainSecret", func(t *testing.T) {
		// Computed apart from this code:
		//   printf 'evt_1.1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'plain secret' -binary | base64
		key, err := Key("plain secret")
		if err != nil {
			t.Fatal(err)
		}
		got := Sign(key, "evt_1", 1700000000, []byte(`{"a":1}`))
		if want := "v1,yfE+cjH0+ochskA9VPOx0NLFdTACQ8Vhvaz1HtzOMV8="; got != want {
			t.Errorf("Sign = %s, want %s", got, want)
		}
	})
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		secret string
		want   string // "": an error
	}{
		{"whsec_aGVsbG8=", "hello"},
		{"hello", "hello"},
		{"whsec", "whsec"}, // no underscore: not the serialisation
		{"whsec_not base64!", ""},
		{"whsec_", ""},
		{"", ""},
	} {
		key, err := Key(tc.secret)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("Key(%q) = %q, want an error", tc.secret, key)
		case tc.want == "" && len(tc.secret) > len("whsec_") && strings.Contains(err.Error(), tc.secret):
			t.Errorf("Key(%q): error %q holds the secret", tc.secret, err)
		case tc.want != "" && err != nil:
			t.Errorf("Key(%q): %v", tc.secret, err)
		case tc.want != "" && string(key) != tc.want:
			t.Errorf("Key(%q) = %q, want %q", tc.secret, key, tc.want)
		}
	}
}

func TestVerify(t *testing.T) {
	key := []byte("a key of the tests, long enough")
	body := []byte(`{"id":"evt_1","type":"shard.done"}`)
	signed := func(ts time.Time) http.Header {
		h := http.Header{}
		h.Set(HeaderID, "evt_1")
		h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(HeaderSignature, Sign(key, "evt_1", ts.Unix(), body))
		return h
	}
	t.Run("Valid", func(t *testing.T) {
		id, err := Verify(key, signed(time.Now()), body, time.Minute)
		if err != nil || id != "evt_1" {
			t.Fatalf("Verify = %q, %v; want evt_1", id, err)
		}
	})
	t.Run("OneOfSeveral", func(t *testing.T) {
		// Rotation: the header holds the new key's and the old key's
		// signatures, and signatures of other schemes.
		h := signed(time.Now())
		h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,abc= "+h.Get(HeaderSignature)+" junk")
		if _, err := Verify(key, h, body, 0); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct {
		name  string
		hdr   func() http.Header
		body  []byte
		key   []byte
		wants string
	}{
		{"WrongSignature", func() http.Header {
			h := signed(time.Now())
			h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
			return h
		}, body, key, "no v1 signature"},
		{"WrongKey", func() http.Header { return signed(time.Now()) }, body, []byte("another key"), "no v1 signature"},
		{"ChangedBody", func() http.Header { return signed(time.Now()) }, []byte(`{"id":"evt_2"}`), key, "no v1 signature"},
		{"OtherScheme", func() http.Header {
			h := signed(time.Now())
			h.Set(HeaderSignature, strings.Replace(h.Get(HeaderSignature), "v1,", "v2,", 1))
			return h
		}, body, key, "no v1 signature"},
		{"Old", func() http.Header { return signed(time.Now().Add(-time.Hour)) }, body, key, "old"},
		{"Ahead", func() http.Header { return signed(time.Now().Add(time.Hour)) }, body, key, "ahead"},
		{"NotSeconds", func() http.Header {
			h := signed(time.Now())
			h.Set(HeaderTimestamp, "2026-12-01T00:00:00Z")
			return h
		}, body, key, "not Unix seconds"},
		{"NoID", func() http.Header { h := signed(time.Now()); h.Del(HeaderID); return h }, body, key, "no webhook-id"},
		{"NoTimestamp", func() http.Header { h := signed(time.Now()); h.Del(HeaderTimestamp); return h }, body, key, "no webhook-timestamp"},
		{"NoSignature", func() http.Header { h := signed(time.Now()); h.Del(HeaderSignature); return h }, body, key, "no webhook-signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := Verify(tc.key, tc.hdr(), tc.body, DefaultTolerance)
			if err == nil {
				t.Fatalf("Verify = %q, want an error", id)
			}
			if !errors.Is(err, ErrNotVerified) || !strings.Contains(err.Error(), tc.wants) {
				t.Errorf("Verify: %v; want ErrNotVerified saying %q", err, tc.wants)
			}
		})
	}
}
