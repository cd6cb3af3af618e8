package notify

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// The secrets of these tests: none may be in an error.
const (
	testSecret      = "whsec_dGhlIHNpZ25pbmcga2V5IG9mIHRoZSB3ZWJob29rIHRlc3Rz"
	testHeaderValue = "Bearer h34d3r-t0k3n-value"
	testQueryToken  = "q-t0k3n-in-the-url"
	testPassword    = "u5er-pa55w0rd"
)

var testEvent = Event{
	ID:   "evt_3f2a9c",
	Type: "shard.done",
	At:   time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	Body: []byte(`{"id":"evt_3f2a9c","type":"shard.done","timestamp":"2026-12-01T10:00:00Z","plan":"p","data":{"table":"t","shard":3}}`),
}

// received is a request a test server got.
type received struct {
	header http.Header
	body   []byte
}

// serve is a test server answering with h, after recording each request
// on the returned channel.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(record(got, h))
	t.Cleanup(srv.Close)
	return srv, got
}

func record(got chan<- received, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: b}
		h(w, r)
	}
}

// hookSink is a webhook sink of url, signed with testSecret and sending
// testHeaderValue.
func hookSink(t *testing.T, url string, change func(*plans.Sink)) Sink {
	t.Helper()
	ps := plans.Sink{
		Name: "ops",
		Webhook: &plans.Webhook{
			URL:       url,
			SecretEnv: "MIGRATE_OPS_SECRET",
			Headers:   map[string]string{"Authorization": testHeaderValue, "X-Short": "1"},
		},
	}
	if change != nil {
		change(&ps)
	}
	s, err := New(ps, env(map[string]string{"MIGRATE_OPS_SECRET": testSecret}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkErr fails t unless err says each of wants and holds no secret.
func checkErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	for _, s := range []string{testSecret, strings.TrimPrefix(testSecret, "whsec_"), testHeaderValue, testQueryToken, testPassword} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q holds a secret", err)
		}
	}
}

func TestWebhook_Send(t *testing.T) {
	ctx := context.Background()
	t.Run("Delivered", func(t *testing.T) {
		srv, got := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
		s := hookSink(t, srv.URL+"/hook?token="+testQueryToken, nil)
		if r := s.Send(ctx, testEvent); r != (Result{}) {
			t.Fatalf("Send = %+v, want delivered", r)
		}
		req := <-got
		if string(req.body) != string(testEvent.Body) {
			t.Errorf("body %s, want %s", req.body, testEvent.Body)
		}
		for k, want := range map[string]string{
			"Content-Type":  "application/json",
			"User-Agent":    "migrate",
			"Authorization": testHeaderValue,
			"X-Short":       "1",
			HeaderID:        testEvent.ID,
		} {
			if v := req.header.Get(k); v != want {
				t.Errorf("header %s: %q, want %q", k, v, want)
			}
		}
		ts, _ := strconv.ParseInt(req.header.Get(HeaderTimestamp), 10, 64)
		if d := time.Since(time.Unix(ts, 0)); d < -time.Minute || d > time.Minute {
			t.Errorf("%s %q is not the time of the attempt", HeaderTimestamp, req.header.Get(HeaderTimestamp))
		}
		key, _ := Key(testSecret)
		if id, err := Verify(key, req.header, req.body, time.Minute); err != nil || id != testEvent.ID {
			t.Errorf("Verify = %q, %v", id, err)
		}
	})
	t.Run("Unsigned", func(t *testing.T) {
		srv, got := serve(t, func(w http.ResponseWriter, r *http.Request) {})
		s := hookSink(t, srv.URL, func(p *plans.Sink) { p.Webhook.SecretEnv = "" })
		if r := s.Send(ctx, testEvent); r != (Result{}) {
			t.Fatalf("Send = %+v, want delivered", r)
		}
		req := <-got
		if v := req.header.Get(HeaderSignature); v != "" || req.header.Get(HeaderID) != testEvent.ID {
			t.Errorf("unsigned: %s %q, %s %q", HeaderSignature, v, HeaderID, req.header.Get(HeaderID))
		}
	})
	t.Run("ServerError", func(t *testing.T) {
		// The answer echoes the request's headers, as some error pages
		// do: their values are taken out of the error.
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "boom:\n\tAuthorization: %s\n%s\n", r.Header.Get("Authorization"), strings.Repeat("x", 10000))
		})
		r := hookSink(t, srv.URL+"/hook?token="+testQueryToken, nil).Send(ctx, testEvent)
		checkErr(t, r.Err, "sink ops: POST "+srv.URL+"/…: 500 Internal Server Error: boom: Authorization: xxxxx xxx", "…")
		if r.Gone || r.RetryAfter != 0 {
			t.Errorf("Send = %+v", r)
		}
		if len(r.Err.Error()) > 400 {
			t.Errorf("error of %d bytes: %q", len(r.Err.Error()), r.Err)
		}
	})
	t.Run("Gone", func(t *testing.T) {
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) })
		r := hookSink(t, srv.URL, nil).Send(ctx, testEvent)
		checkErr(t, r.Err, "410 Gone")
		if !r.Gone {
			t.Errorf("Send = %+v, want Gone", r)
		}
	})
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		min, max   time.Duration
	}{
		{"TooManySeconds", http.StatusTooManyRequests, "120", 120 * time.Second, 120 * time.Second},
		// An HTTP date has whole seconds, and the clock moves on between
		// writing it and reading it.
		{"TooManyDate", http.StatusTooManyRequests, time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), 60 * time.Second, 91 * time.Second},
		{"UnavailableCapped", http.StatusServiceUnavailable, "86400", time.Hour, time.Hour},
		{"TooManyNone", http.StatusTooManyRequests, "", 0, 0},
		{"NotHonouredOn500", http.StatusInternalServerError, "120", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
			})
			r := hookSink(t, srv.URL, nil).Send(ctx, testEvent)
			checkErr(t, r.Err, strconv.Itoa(tc.status))
			if r.RetryAfter < tc.min || r.RetryAfter > tc.max || r.Gone {
				t.Errorf("Send = %+v, want RetryAfter in [%v, %v]", r, tc.min, tc.max)
			}
		})
	}
	t.Run("RedirectNotFollowed", func(t *testing.T) {
		var hits atomic.Int32
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer target.Close()
		srv, got := serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/moved?token="+testQueryToken, http.StatusFound)
		})
		r := hookSink(t, srv.URL, nil).Send(ctx, testEvent)
		checkErr(t, r.Err, "302 Found", "Location "+target.URL+"/…)")
		if len(got) != 1 || hits.Load() != 0 {
			t.Errorf("the sink's URL got %d requests, the redirect's target %d; want 1 and 0", len(got), hits.Load())
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release) // before srv.Close, which waits for the handler
		s := hookSink(t, srv.URL+"/slow?token="+testQueryToken, func(p *plans.Sink) { p.Timeout = 300 * time.Millisecond })
		start := time.Now()
		r := s.Send(ctx, testEvent)
		checkErr(t, r.Err, "sink ops: POST "+srv.URL+"/…: no answer within 300ms")
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Send took %v with a timeout of 300ms", took)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := strings.Replace(srv.URL, "http://", "http://user:"+testPassword+"@", 1) + "/hook?token=" + testQueryToken
		srv.Close()
		r := hookSink(t, url, nil).Send(ctx, testEvent)
		checkErr(t, r.Err, "sink ops: POST "+srv.URL+"/…: ", "connection refused")
	})
	t.Run("Cancelled", func(t *testing.T) {
		srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		r := hookSink(t, srv.URL, nil).Send(cctx, testEvent)
		checkErr(t, r.Err, "context canceled")
	})
}

func TestWebhook_TLS(t *testing.T) {
	got := make(chan received, 10)
	srv := httptest.NewUnstartedServer(record(got, func(w http.ResponseWriter, r *http.Request) {}))
	// The refused handshake of NoCAFile is the point, not news for the
	// test's output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Run("CAFile", func(t *testing.T) {
		s := hookSink(t, srv.URL+"/hook", func(p *plans.Sink) { p.Webhook.CAFile = caFile })
		if r := s.Send(ctx, testEvent); r != (Result{}) {
			t.Fatalf("Send = %+v, want delivered", r)
		}
		if req := <-got; req.header.Get(HeaderID) != testEvent.ID {
			t.Errorf("received %v", req.header)
		}
	})
	t.Run("NoCAFile", func(t *testing.T) {
		r := hookSink(t, srv.URL+"/hook", nil).Send(ctx, testEvent)
		checkErr(t, r.Err, "sink ops: POST "+srv.URL+"/…: ", "certificate")
		if len(got) != 0 {
			t.Errorf("the receiver got a request over an unverified connection")
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                                0,
		"0":                               0,
		"-5":                              0,
		"soon":                            0,
		"1.5":                             0,
		" 30 ":                            30 * time.Second,
		"3600":                            time.Hour,
		"99999999999999999999":            time.Hour, // past int64: not seconds, not a date
		"999999999999":                    time.Hour,
		"Tue, 01 Dec 2026 10:00:45 GMT":   45 * time.Second,
		"Tue, 01 Dec 2026 09:59:00 GMT":   0,
		"Wed, 02 Dec 2026 10:00:00 GMT":   time.Hour,
		"Tuesday, 01-Dec-26 10:02:00 GMT": 2 * time.Minute, // RFC 850, still to be read
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
