package status

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fullStatus is a plan's state with every section of the page filled: a
// table under way and one with a halted shard, a takeover, the post-load
// phase, a change stream, leases, two sinks and recent events.
func fullStatus() *Status {
	st := &Status{
		Plan: "orders-2024",
		Totals: []TableTotal{
			{Table: "shop.orders", Target: "orders", Shards: 3, ShardsDone: 1, ShardsRunning: 1, RowsDone: 1500,
				RowsEstimated: new(int64(4000)), RowsPerSec: new(212.6), EtaMs: new(int64(11_759))},
			{Table: "shop.order_items", Target: "order_items", Shards: 2, ShardsDone: 0, ShardsRunning: 0, RowsDone: 7},
		},
		Tables: []ShardStatus{
			{Table: "shop.orders", Target: "orders", Shard: 0, State: "done", RowsDone: 1000, LastKey: json.RawMessage(`1000`),
				Token: 4, UpdatedAt: "2024-05-01T10:00:00Z", Watermark: 4, Holder: "b-2", Takeovers: 1, EtaMs: new(int64(0))},
			{Table: "shop.orders", Target: "orders", Shard: 1, State: "running", RowsDone: 500, LastKey: json.RawMessage(`1500`),
				Token: 5, UpdatedAt: "2024-05-01T10:00:01.5Z", Watermark: 5, Holder: "b-2",
				LastTakeover: json.RawMessage(`null`), RowsPerSec: new(212.6), EtaMs: new(int64(2_351))},
			{Table: "shop.orders", Target: "orders", Shard: 2, State: "pending", LastKey: json.RawMessage(`null`),
				UpdatedAt: "2024-05-01T09:59:00Z", LastTakeover: json.RawMessage(`null`)},
			{Table: "shop.order_items", Target: "order_items", Shard: 0, State: "halted", RowsDone: 7, LastKey: json.RawMessage(`[7,"b"]`),
				Token: 2, UpdatedAt: "2024-05-01T09:59:30Z", Watermark: 2, Holder: "a-1",
				Takeovers: 4, LastTakeover: json.RawMessage(`{"token":0}`)}, // a record without a token shows no RTO
			{Table: "shop.order_items", Target: "order_items", Shard: 1, State: "pending", LastKey: json.RawMessage(`null`),
				UpdatedAt: "2024-05-01T09:59:00Z", LastTakeover: json.RawMessage(`null`)},
		},
		PostLoad: &PostLoadStatus{State: "running", Steps: 4, StepsDone: 1},
		Leases: []LeaseStatus{
			{Table: "shop.orders", Target: "orders", Shard: 1, Owner: "b-2", Token: 5, TTLMs: 27_500},
			{Table: "shop.orders", Target: "orders", Shard: 2, Owner: "c-3", Token: 1}, // ZooKeeper: no TTL told
		},
	}
	st.Tables[3].HaltReason = "batch after [7,\"b\"] failed 5 times: target refused a value"
	st.Tables[3].ResumeCommand = "migrate resume -p orders.yaml --table shop.order_items --shard 0"
	st.Tables[0].LastTakeover = json.RawMessage(`{"token":4,"previous_owner":"a-1","previous_token":3,"wait_ms":31000,"elect_ms":12,` +
		`"recover_ms":40,"verify_ms":182,"rto_ms":31234,"predicted_rto_ms":33000,"replayed_rows":1000}`)
	at := time.Date(2024, 5, 1, 10, 0, 1, 0, time.UTC)
	retained := int64(3 << 20)
	st.Stream = &StreamStatus{State: "following", Pos: "0/16B3748", StartPos: "0/16A0000", Transactions: 1200, Changes: 5400,
		LagMs: 850, LagBytes: 4096, AppliedAt: &at, RetainedBytes: &retained}
	st.Notify = []SinkStatus{
		{Name: "ops-webhook", Kind: "webhook", Delivered: 41, Pending: 2, OldestPendingMs: new(int64(12_500)),
			LastError: "post https://hooks.example.com/T00/B00/s3cr3t: 503 Service Unavailable", LastErrorAt: &at},
		{Name: "pager", Kind: "command", Delivered: 7, GivenUp: 1, Disabled: true},
	}
	st.Events = []EventStatus{
		{Seq: 43, ID: "01HX-43", Type: "shard.halted", At: at, Subject: "shop.order_items/0", DeliveredTo: []string{"pager"}, PendingFor: []string{"ops-webhook"}},
		{Seq: 42, ID: "01HX-42", Type: "shard.taken_over", At: at.Add(-time.Minute), Subject: "shop.orders/0", DeliveredTo: []string{"ops-webhook", "pager"}},
	}
	return st
}

// get serves one request of method to path on a Page reading st (or
// failing with readErr) and returns the response and its body.
func get(t *testing.T, method, path string, st *Status, readErr error) (*http.Response, string) {
	t.Helper()
	p := &Page{Plan: "orders-2024", Read: func(context.Context) (*Status, error) { return st, readErr }}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// cell is one element of the page that carries a number or word the tests
// read: its data-key, data-table, data-shard (or data-sink) and data-value.
type cell struct{ key, table, shard, sink, value string }

var (
	keyedRE = regexp.MustCompile(`<[a-z]+ [^>]*data-key="[^"]*"[^>]*>`)
	attrRE  = regexp.MustCompile(`(data-[a-z]+)="([^"]*)"`)
)

// cells are the keyed elements of a page, values unescaped.
func cells(page string) []cell {
	var out []cell
	for _, tag := range keyedRE.FindAllString(page, -1) {
		var c cell
		for _, m := range attrRE.FindAllStringSubmatch(tag, -1) {
			v := htmlUnescape(m[2])
			switch m[1] {
			case "data-key":
				c.key = v
			case "data-table":
				c.table = v
			case "data-shard":
				c.shard = v
			case "data-sink":
				c.sink = v
			case "data-value":
				c.value = v
			}
		}
		out = append(out, c)
	}
	return out
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&quot;", `"`, "&amp;", "&").Replace(s)
}

// value is the data-value of the element keyed key for table and shard
// ("" for a table's total); ok is false when there is none.
func value(cs []cell, key, table, shard string) (string, bool) {
	for _, c := range cs {
		if c.key == key && c.table == table && c.shard == shard && c.sink == "" {
			return c.value, true
		}
	}
	return "", false
}

func TestPage_ServeHTTP(t *testing.T) {
	st := fullStatus()
	res, body := get(t, http.MethodGet, "/", st, nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %s %q\n%s", res.Status, res.Header.Get("Content-Type"), body)
	}
	if dir := os.Getenv("MIGRATE_TEST_ARTIFACTS"); dir != "" { // to look at it in a browser
		_ = os.WriteFile(dir+"/status-page-unit.html", []byte(body), 0o644)
	}
	cs := cells(body)
	for _, s := range st.Tables {
		sh := itoa(s.Shard)
		for key, want := range map[string]string{
			"state": s.State, "rows_done": itoa(s.RowsDone), "holder": s.Holder, "token": itoa(s.Token),
			"watermark": itoa(s.Watermark), "updated_at": s.UpdatedAt, "takeovers": itoa(s.Takeovers),
		} {
			if got, ok := value(cs, key, s.Table, sh); !ok || got != want {
				t.Errorf("%s#%s %s = %q (found %v), want %q", s.Table, sh, key, got, ok, want)
			}
		}
	}
	for _, tt := range st.Totals {
		for key, want := range map[string]string{"rows_done": itoa(tt.RowsDone), "shards_done": itoa(tt.ShardsDone), "shards_running": itoa(tt.ShardsRunning)} {
			if got, ok := value(cs, key, tt.Table, ""); !ok || got != want {
				t.Errorf("total of %s: %s = %q (found %v), want %q", tt.Table, key, got, ok, want)
			}
		}
	}
	if got, _ := value(cs, "rows_estimated", "shop.orders", ""); got != "4000" {
		t.Errorf("rows_estimated of shop.orders = %q, want 4000", got)
	}
	if got, _ := value(cs, "last_key", "shop.order_items", "0"); got != `[7,"b"]` {
		t.Errorf("last_key of the composite-key shard = %q", got)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		`<progress value="1500" max="4000">`, "37.5%", // orders: 1500 of 4000
		"213 rows/s", "12s", // the table's rate and ETA
		`<tr class="state-halted"`, // the halted shard is marked
		"target refused a value",
		`<code data-key="resume_command">migrate resume -p orders.yaml --table shop.order_items --shard 0</code>`,
		`data-key="rto_ms" data-value="31234"`, `data-key="predicted_rto_ms" data-value="33000"`,
		`data-key="wait_ms" data-value="31000"`, `data-key="verify_ms" data-value="182"`, "−1.766s", // within the prediction by 1.766s
		`id="post-load"`, `data-key="post_load_state" data-value="running"`,
		`data-key="stream_state" data-value="following"`, "0/16B3748", "5,400 changes in 1,200 transactions", "3.0 MiB",
		`data-key="pending" data-sink="ops-webhook" data-value="2"`, `data-key="oldest_pending_ms" data-sink="ops-webhook" data-value="12500"`,
		`data-key="given_up" data-sink="pager" data-value="1"`, `data-key="disabled" data-sink="pager" data-value="true"`, "503 Service Unavailable",
		`data-key="event_type" data-seq="43" data-value="shard.halted"`, "shard.taken_over",
		`data-key="lease_owner" data-table="shop.orders" data-shard="1" data-value="b-2"`,
		`<strong class="bad">1 halted</strong>`, `data-key="plan_shards_done" data-value="1"`, `data-key="plan_shards" data-value="5"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// A sink's error names its URL, which may hold a token: the page
	// shows the scheme only.
	if strings.Contains(body, "s3cr3t") || strings.Contains(body, "hooks.example.com") {
		t.Error("the page shows a webhook's URL")
	}
}

func TestPage_ServeHTTP_empty(t *testing.T) {
	st := &Status{Plan: "fresh", Tables: []ShardStatus{}, Leases: []LeaseStatus{}, Totals: []TableTotal{{Table: "t", Target: "t", Shards: 2}}}
	res, body := get(t, http.MethodGet, "/", st, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "No checkpoints yet") || !strings.Contains(body, "no estimate yet") {
		t.Fatalf("GET / of a plan not run yet: %s\n%s", res.Status, body)
	}
	for _, absent := range []string{`id="shards"`, `id="halted"`, `id="takeovers"`, `id="post-load"`, `id="stream"`, `id="notify"`, `id="events"`} {
		if strings.Contains(body, absent) {
			t.Errorf("the page of a plan not run yet has %s", absent)
		}
	}
}

func TestPage_ServeHTTP_escapes(t *testing.T) {
	const hostile = `<script>alert(1)</script>`
	st := fullStatus()
	for i := range st.Tables {
		st.Tables[i].Table = hostile
		st.Tables[i].Holder = `"><img src=x onerror=alert(2)>`
	}
	st.Totals[0].Table = hostile
	st.Plan = `</title><script>alert(3)</script>`
	st.Tables[3].HaltReason = `<iframe src="javascript:alert(4)">`
	st.Notify[0].Name = `x" onmouseover="alert(5)`
	st.Events[0].Subject = `<b>bold</b>`
	_, body := get(t, http.MethodGet, "/", st, nil)
	for _, bad := range []string{"<script", "<img", "<iframe", `" onmouseover=`, "<b>bold"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile table name is not shown escaped")
	}
	cs := cells(body)
	if got, ok := value(cs, "rows_done", hostile, "0"); !ok || got != "1000" {
		t.Errorf("rows_done of the hostile table's shard 0 = %q (found %v)", got, ok)
	}
}

func TestPage_ServeHTTP_methods(t *testing.T) {
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, "PROPFIND"} {
		for _, path := range []string{"/", "/status.json"} {
			res, _ := get(t, m, path, fullStatus(), nil)
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %s, Allow %q; want 405, GET, HEAD", m, path, res.Status, res.Header.Get("Allow"))
			}
		}
	}
	res, body := get(t, http.MethodHead, "/", fullStatus(), nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD /: %s, Content-Length %q, %d bytes", res.Status, res.Header.Get("Content-Length"), len(body))
	}
	if res, _ := get(t, http.MethodGet, "/metrics", fullStatus(), nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics of the page alone: %s, want 404", res.Status)
	}
}

// TestPage_ServeHTTP_json: /status.json is exactly what `migrate status
// --json` prints, which writes WriteJSON.
func TestPage_ServeHTTP_json(t *testing.T) {
	st := fullStatus()
	res, body := get(t, http.MethodGet, "/status.json", st, nil)
	var want bytes.Buffer
	if err := WriteJSON(&want, st); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" || body != want.String() {
		t.Fatalf("GET /status.json: %s %q\n%s\nwant\n%s", res.Status, res.Header.Get("Content-Type"), body, want.String())
	}
	var back Status
	if err := json.Unmarshal([]byte(body), &back); err != nil || back.Plan != st.Plan || len(back.Tables) != len(st.Tables) {
		t.Errorf("the JSON does not read back: %v", err)
	}
}

func TestPage_ServeHTTP_headers(t *testing.T) {
	for _, path := range []string{"/", "/status.json"} {
		res, body := get(t, http.MethodGet, path, fullStatus(), nil)
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.HasPrefix(csp, "default-src 'none'; style-src 'sha256-") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s headers: %v", path, res.Header)
		}
		if path != "/" {
			continue
		}
		// The one style sheet is inline, and the policy names its hash.
		m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatal("no style sheet")
		}
		sum := sha256.Sum256([]byte(m[1]))
		if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) {
			t.Errorf("CSP %q does not allow the page's style sheet (%s)", csp, want)
		}
		// Nothing is loaded from anywhere, and nothing runs.
		for _, bad := range []string{"<script", "<link", "<img", "<iframe", "<form", "<button", "<input", `href="http`, "src=", "url(", "@import"} {
			if strings.Contains(body, bad) {
				t.Errorf("the page holds %q", bad)
			}
		}
	}
}

func TestPage_ServeHTTP_readError(t *testing.T) {
	readErr := errors.New(`target postgres://migrate:xxxxx@db.internal:5432/app: dial tcp 10.0.0.5:5432: connect: connection refused`)
	res, body := get(t, http.MethodGet, "/", nil, readErr)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "connect: connection refused") ||
		!strings.Contains(body, "orders-2024") || !strings.Contains(body, `<meta http-equiv="refresh"`) {
		t.Fatalf("GET / when the state cannot be read: %s\n%s", res.Status, body)
	}
	if strings.Contains(body, "db.internal") || strings.Contains(body, "postgres://migrate") {
		t.Errorf("the error page shows a DSN:\n%s", body)
	}
	res, body = get(t, http.MethodGet, "/status.json", nil, readErr)
	var e struct {
		Error string `json:"error"`
	}
	if res.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil ||
		e.Error != "target postgres://…: dial tcp 10.0.0.5:5432: connect: connection refused" {
		t.Errorf("GET /status.json when the state cannot be read: %s %s", res.Status, body)
	}
}

func TestPage_ServeHTTP_timeout(t *testing.T) {
	p := &Page{Timeout: 20 * time.Millisecond, Read: func(ctx context.Context) (*Status, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "deadline exceeded") {
		t.Errorf("a read that hangs: %d\n%s", rec.Code, rec.Body.String())
	}
}

func TestHideURLs(t *testing.T) {
	for in, want := range map[string]string{
		"target postgres://u:xxxxx@h:5432/db: refused":           "target postgres://…: refused",
		"lock redis://h:6379/0, then mysql://u@h/db.":            "lock redis://…, then mysql://….",
		"(see https://example.com/a?b=c) done":                   "(see https://…) done",
		"no URL here: host:5432":                                 "no URL here: host:5432",
		`post "https://hooks.example.com/T/B/x": 410 Gone`:       `post "https://…": 410 Gone`,
		"etcd://h1:2379,h2:2379/prefix unavailable at start":     "etcd://… unavailable at start",
		"zk://h1:2181/migrate; lock db (the target postgres://…": "zk://…; lock db (the target postgres://…",
	} {
		if got := hideURLs(in); got != want {
			t.Errorf("hideURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

func itoa[T int | int64](n T) string { return strconv.FormatInt(int64(n), 10) }
