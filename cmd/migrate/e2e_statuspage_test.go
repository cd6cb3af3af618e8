package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The status page in a browser: a headless Chromium (Debian's chromium,
// which scripts/services.sh installs) loads it, and the numbers it shows
// are compared with `migrate status --json`.

// pageStatus is what these tests read of `status --json`.
type pageStatus struct {
	Plan   string `json:"plan"`
	Tables []struct {
		Table     string   `json:"table"`
		Shard     int      `json:"shard"`
		State     string   `json:"state"`
		RowsDone  int64    `json:"rows_done"`
		Token     int64    `json:"token"`
		Watermark int64    `json:"watermark"`
		Holder    string   `json:"holder"`
		UpdatedAt string   `json:"updated_at"`
		Rate      *float64 `json:"rows_per_sec"`
	} `json:"tables"`
	Totals []struct {
		Table         string `json:"table"`
		Shards        int    `json:"shards"`
		ShardsDone    int    `json:"shards_done"`
		ShardsRunning int    `json:"shards_running"`
		RowsDone      int64  `json:"rows_done"`
	} `json:"totals"`
	Leases   []json.RawMessage `json:"leases"`
	PostLoad *struct {
		State string `json:"state"`
	} `json:"post_load"`
	Notify []struct {
		Name      string `json:"name"`
		Delivered int64  `json:"delivered"`
		Pending   int64  `json:"pending"`
	} `json:"notify"`
	Events []struct {
		ID string `json:"id"`
	} `json:"events"`
}

// readPageStatus runs `status --json` and returns its output and what it
// says.
func readPageStatus(t *testing.T, plan string) (string, pageStatus) {
	t.Helper()
	r := startMigrateEnv(t, notifyEnv, "status", "-p", plan, "--json").wait(t)
	wantCode(t, r, 0)
	var st pageStatus
	decodeJSON(t, r, &st)
	return r.stdout, st
}

// rowsDone sums the shards' rows done.
func (st pageStatus) rowsDone() (n int64) {
	for _, s := range st.Tables {
		n += s.RowsDone
	}
	return n
}

// chromiumBin is Debian's chromium; a missing one is a failure, as a
// missing database is (scripts/services.sh start installs it).
func chromiumBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): scripts/services.sh start installs it (apt-get install chromium)", err)
	}
	return p
}

// chromium runs headless Chromium with args on a profile of its own (two
// at once must not share one) and returns its stdout.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--disable-background-networking", "--disable-sync", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// artifacts is where the tests leave screenshots: $MIGRATE_TEST_ARTIFACTS,
// else a temporary folder of the test.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MIGRATE_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browse loads the page at base (http://ADDR/) in Chromium: its DOM
// after loading, and a screenshot saved as name in the artifacts.
func browse(t *testing.T, base, name string) string {
	t.Helper()
	bin := chromiumBin(t)
	start := time.Now()
	dom := chromium(t, bin, "--dump-dom", base)
	t.Logf("chromium --dump-dom %s: %v", base, time.Since(start).Round(time.Millisecond))
	shot := filepath.Join(artifacts(t), name)
	chromium(t, bin, "--screenshot="+shot, "--window-size=1280,1600", base)
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot of %s: %s", base, shot)
	return dom
}

var (
	keyedTagRE = regexp.MustCompile(`<[a-z]+ [^>]*data-key="[^"]*"[^>]*>`)
	dataAttrRE = regexp.MustCompile(`(data-[a-z]+)="([^"]*)"`)
)

// pageValues are the page's keyed values: "key table#shard" (a shard's),
// "key table" (a table's total) -> data-value.
func pageValues(dom string) map[string]string {
	out := map[string]string{}
	for _, tag := range keyedTagRE.FindAllString(dom, -1) {
		a := map[string]string{}
		for _, m := range dataAttrRE.FindAllStringSubmatch(tag, -1) {
			a[m[1]] = html.UnescapeString(m[2])
		}
		k := a["data-key"] + " " + a["data-table"] + a["data-sink"]
		if s, ok := a["data-shard"]; ok {
			k += "#" + s
		}
		out[k] = a["data-value"]
	}
	return out
}

// comparePage checks that the page shows what `status --json` says: per
// shard its state, rows done, token, watermark and holder; per table its
// rows and shards done and running.
func comparePage(t *testing.T, dom string, st pageStatus) {
	t.Helper()
	vals := pageValues(dom)
	if got := vals["plan_shards_done "]; got == "" {
		t.Errorf("the page has no shard count; is it the status page?\n%s", dom)
	}
	for _, s := range st.Tables {
		at := fmt.Sprintf("%s#%d", s.Table, s.Shard)
		for key, want := range map[string]string{
			"state": s.State, "rows_done": strconv.FormatInt(s.RowsDone, 10), "token": strconv.FormatInt(s.Token, 10),
			"watermark": strconv.FormatInt(s.Watermark, 10), "holder": s.Holder, "updated_at": s.UpdatedAt,
		} {
			if got, ok := vals[key+" "+at]; !ok || got != want {
				t.Errorf("the page shows %s of %s = %q (shown: %v), status --json says %q", key, at, got, ok, want)
			}
		}
	}
	for _, tt := range st.Totals {
		for key, want := range map[string]int64{"rows_done": tt.RowsDone, "shards_done": int64(tt.ShardsDone), "shards_running": int64(tt.ShardsRunning)} {
			if got := vals[key+" "+tt.Table]; got != strconv.FormatInt(want, 10) {
				t.Errorf("the page shows %s of table %s = %q, status --json says %d", key, tt.Table, got, want)
			}
		}
	}
	for _, s := range st.Notify {
		for key, want := range map[string]int64{"delivered": s.Delivered, "pending": s.Pending} {
			if got := vals[key+" "+s.Name]; got != strconv.FormatInt(want, 10) {
				t.Errorf("the page shows %s of sink %s = %q, status --json says %d", key, s.Name, got, want)
			}
		}
	}
	for _, ev := range st.Events {
		if !strings.Contains(dom, ev.ID) {
			t.Errorf("the page does not show event %s", ev.ID)
		}
	}
}

// noDSN checks that text shows no DSN and none of the passwords.
func noDSN(t *testing.T, what, text string, passwords []string) {
	t.Helper()
	assertNoSecret(t, what, text, passwords)
	for _, scheme := range []string{"postgres://", "postgresql://", "mysql://", "redis://"} {
		if strings.Contains(text, scheme) {
			t.Errorf("%s shows a DSN (%s…)", what, scheme)
		}
	}
}

// fetch GETs (or POSTs) base+path and returns the status code and body.
func fetch(t *testing.T, method, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// seedShop creates an application's tables in e's source: customers,
// their orders, the orders' lines (a composite key), with foreign keys,
// a unique index and a check; n orders.
func seedShop(t *testing.T, e *env, n int) (rows int64) {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE customers (id bigint PRIMARY KEY, email text NOT NULL UNIQUE, name text NOT NULL, country char(2) NOT NULL,
  created_at timestamptz NOT NULL)`,
		`CREATE TABLE orders (id bigint PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id),
  status text NOT NULL CHECK (status IN ('new', 'paid', 'shipped', 'cancelled')), total numeric(12,2) NOT NULL,
  created_at timestamptz NOT NULL, note text)`,
		`CREATE INDEX orders_customer ON orders (customer_id)`,
		`CREATE TABLE order_lines (order_id bigint NOT NULL REFERENCES orders (id), line integer NOT NULL, sku varchar(20) NOT NULL,
  qty integer NOT NULL, price numeric(10,2) NOT NULL, PRIMARY KEY (order_id, line))`,
		fmt.Sprintf(`INSERT INTO customers SELECT g, 'user' || g || '@example.com', 'Customer ' || g, (ARRAY['DE','FR','NP','US'])[1 + g %% 4],
  timestamptz '2023-01-01 00:00:00+00' + g * interval '1 minute' FROM generate_series(1, %d) g`, n/10),
		fmt.Sprintf(`INSERT INTO orders SELECT g, 1 + g %% %d, (ARRAY['new','paid','shipped','cancelled'])[1 + g %% 4], (g %% 100000) / 100.0,
  timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', CASE WHEN g %% 3 = 0 THEN 'gift ' || g END FROM generate_series(1, %d) g`, n/10, n),
		fmt.Sprintf(`INSERT INTO order_lines SELECT o, l, 'SKU-' || (o * 7 + l) %% 9973, 1 + (o + l) %% 5, ((o * l) %% 10000) / 100.0
  FROM generate_series(1, %d) o, generate_series(1, 2) l`, n),
		`ANALYZE customers`, `ANALYZE orders`, `ANALYZE order_lines`,
	} {
		exec1(t, e.srcDB, q)
	}
	return int64(n/10 + n + 2*n)
}

// TestStatusPage_RunAndServe: the page that `run --metrics-addr` serves,
// loaded in Chromium while the copy is under way and frozen, shows the
// numbers of `status --json`, and no DSN or password; `status --serve`
// shows the same once the run is done, without any run.
//
// One instance holds every shard and copies; the other, with
// --metrics-addr, stands by and serves the page. The holder is frozen
// (SIGSTOP) mid-copy so that the durable state stops moving while the
// page and the JSON are read and compared, for well under its lease's
// TTL (60s, so that a slow browser on a loaded machine does not let the
// standby take over), then woken to finish.
func TestStatusPage_RunAndServe(t *testing.T) {
	t.Parallel()
	chromiumBin(t) // fail early without it
	e := newEnv(t, pgEngine, pgEngine)
	e.leaseTTL, e.batchSize = "60s", 500
	const orders = 300000
	total := seedShop(t, e, orders)
	rc := newReceiver(t) // the page shows the delivery of the run's events
	e.extra = notifyPlan(rc, filepath.Join(t.TempDir(), "events.jsonl"))
	plan := e.plan(t, planTable{name: "customers", shards: 1}, planTable{name: "orders", shards: 2}, planTable{name: "order_lines", shards: 2})
	var passwords []string
	for _, u := range []string{e.srcURL, e.dstURL} {
		if pu, err := url.Parse(u); err == nil {
			if pw, ok := pu.User.Password(); ok && pw != "" {
				passwords = append(passwords, pw)
			}
		}
	}
	if len(passwords) == 0 {
		t.Fatal("the test databases' DSNs hold no password: the check that the page shows none would prove nothing")
	}

	holder := startMigrateEnv(t, notifyEnv, "run", "-p", plan, "--instance", "holder", "--parallel", "5")
	// Every shard held by the holder, before the standby starts.
	poll(t, 90*time.Second, "the holder to claim the five shards", func() bool {
		select {
		case <-holder.done:
			t.Fatalf("the holder ended before claiming every shard:\n%s", holder.wait(t))
		default:
		}
		_, st := readPageStatus(t, plan)
		claimed := 0
		for _, s := range st.Tables {
			if s.State == "running" || s.State == "done" {
				claimed++
			}
		}
		return claimed == 5
	})
	standby := startMigrateEnv(t, notifyEnv, "run", "-p", plan, "--instance", "standby", "--metrics-addr", "127.0.0.1:0")
	addrRE := regexp.MustCompile(`status=http://([0-9.:]+)/`)
	var base string
	poll(t, 60*time.Second, "the standby to serve the status page", func() bool {
		m := addrRE.FindStringSubmatch(standby.stderr.String())
		if m == nil {
			return false
		}
		base = "http://" + m[1] + "/"
		code, _ := fetch(t, http.MethodGet, base)
		return code == http.StatusOK
	})

	// Some rows copied, with the holder's pace published, not all.
	var before pageStatus
	poll(t, 90*time.Second, "rows copied and the holder's pace published", func() bool {
		_, before = readPageStatus(t, plan)
		rated := 0
		for _, s := range before.Tables {
			if s.Rate != nil {
				rated++
			}
		}
		return before.rowsDone() > 0 && rated > 0
	})
	signal(t, holder, syscall.SIGSTOP)
	frozen := time.Now()
	// A commit sent just before the signal may still land: the state is
	// still when two reads agree.
	var jsonText string
	var st pageStatus
	poll(t, 30*time.Second, "the frozen holder's state to be still", func() bool {
		prev := st
		jsonText, st = readPageStatus(t, plan)
		return prev.Plan != "" && prev.rowsDone() == st.rowsDone()
	})
	if done := st.rowsDone(); done >= total {
		t.Fatalf("the copy was done (%d of %d rows) before the holder was frozen: make it bigger", done, total)
	}
	t.Logf("holder frozen with %d of %d rows done, still after %v", st.rowsDone(), total, time.Since(frozen).Round(time.Millisecond))
	dom := browse(t, base, "status-page-run.png")
	t.Logf("page loaded and captured %v after the freeze", time.Since(frozen).Round(time.Millisecond))
	comparePage(t, dom, st)
	if !strings.Contains(dom, "holder") || !strings.Contains(dom, `<progress`) || !strings.Contains(dom, `http-equiv="refresh"`) {
		t.Errorf("the page lacks the holder, a progress bar or its refresh:\n%s", dom)
	}
	noDSN(t, "the status page (run)", dom, passwords)
	noDSN(t, "status --json", jsonText, passwords)
	code, body := fetch(t, http.MethodGet, base+"status.json")
	var served pageStatus
	if err := json.Unmarshal([]byte(body), &served); code != http.StatusOK || err != nil || served.rowsDone() != st.rowsDone() || len(served.Tables) != len(st.Tables) {
		t.Errorf("GET /status.json: %d, %v, %d rows done; status --json says %d", code, err, served.rowsDone(), st.rowsDone())
	}
	noDSN(t, "/status.json (run)", body, passwords)
	if code, _ := fetch(t, http.MethodPost, base); code != http.StatusMethodNotAllowed {
		t.Errorf("POST / on the run's page: %d, want 405", code)
	}
	if code, m := fetch(t, http.MethodGet, base+"metrics"); code != http.StatusOK || !strings.Contains(m, "migrate_shard_state") {
		t.Errorf("GET /metrics beside the page: %d", code)
	}
	if d := time.Since(frozen); d > 45*time.Second {
		t.Logf("the holder was frozen for %v, close to its 60s lease", d)
	}
	signal(t, holder, syscall.SIGCONT)
	t.Logf("holder woken after %v", time.Since(frozen).Round(time.Millisecond))
	wantCode(t, holder.wait(t), 0)
	wantCode(t, standby.wait(t), 0)
	t.Logf("run done %v after the freeze", time.Since(frozen).Round(time.Millisecond))

	// After the run: `status --serve`, no run needed.
	srv := startMigrateEnv(t, notifyEnv, "status", "-p", plan, "--serve", "127.0.0.1:0")
	serveRE := regexp.MustCompile(`serving the status of plan ` + regexp.QuoteMeta(e.name) + ` at (http://[0-9.:]+/)\n`)
	poll(t, 60*time.Second, "status --serve to listen", func() bool {
		select {
		case <-srv.done:
			t.Fatalf("status --serve ended:\n%s", srv.wait(t))
		default:
		}
		m := serveRE.FindStringSubmatch(srv.stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	jsonText, st = readPageStatus(t, plan)
	dom = browse(t, base, "status-page-serve.png")
	comparePage(t, dom, st)
	for _, s := range st.Tables {
		if s.State != "done" {
			t.Errorf("%s#%d is %s after the run, want done", s.Table, s.Shard, s.State)
		}
	}
	if len(st.Events) == 0 || len(st.Notify) != 2 || st.Notify[0].Delivered == 0 {
		t.Errorf("after the run: events %v, sinks %+v; want the run's events delivered", st.Events, st.Notify)
	}
	if st.rowsDone() != total || st.PostLoad == nil || st.PostLoad.State != "done" {
		t.Errorf("after the run: %d of %d rows, post-load %+v; want all and done", st.rowsDone(), total, st.PostLoad)
	}
	if vals := pageValues(dom); vals["plan_shards_done "] != "5" || vals["post_load_state "] != "done" {
		t.Errorf("the page after the run shows %s of the shards done, post-load %q; want 5, done", vals["plan_shards_done "], vals["post_load_state "])
	}
	noDSN(t, "the status page (serve)", dom, passwords)
	// Nothing moves now: /status.json is status --json, byte for byte.
	if code, body := fetch(t, http.MethodGet, base+"status.json"); code != http.StatusOK || body != jsonText {
		t.Errorf("GET /status.json: %d\n%s\nstatus --json:\n%s", code, body, jsonText)
	}
	for path, want := range map[string]int{"metrics": http.StatusNotFound, "favicon.ico": http.StatusNotFound} {
		if code, _ := fetch(t, http.MethodGet, base+path); code != want {
			t.Errorf("GET /%s on status --serve: %d, want %d", path, code, want)
		}
	}
	if code, _ := fetch(t, http.MethodDelete, base); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE / on status --serve: %d, want 405", code)
	}
	signal(t, srv, syscall.SIGINT)
	r := srv.wait(t)
	wantCode(t, r, 0)
	noDSN(t, "status --serve's stderr", r.stderr, passwords)
}
