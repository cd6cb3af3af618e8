package status

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WriteJSON writes v as every --json of the CLI prints it: one indented
// JSON object. The status page's /status.json is `migrate status --json`'s
// bytes.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// PageTimeout bounds one read of the state for the status page when
// Page.Timeout is 0.
const PageTimeout = 10 * time.Second

// PageRefresh is how often the page reloads itself, in seconds.
const PageRefresh = 5

//go:embed page/page.html page/page.css
var pageFiles embed.FS

var (
	pageTmpl = template.Must(template.New("page.html").Funcs(pageFuncs).ParseFS(pageFiles, "page/page.html"))
	pageCSS  = mustRead(pageFiles, "page/page.css")
	// pageCSP lets the page apply its one inline style sheet, named by its
	// hash, and nothing else: no script, image, font, frame, form or
	// connection, from anywhere.
	pageCSP = "default-src 'none'; style-src 'sha256-" + hashCSS(pageCSS) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func mustRead(fs embed.FS, name string) string {
	b, err := fs.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func hashCSS(css string) string {
	sum := sha256.Sum256([]byte(css))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Page serves a plan's status to a browser, read-only: GET / is an HTML
// page that reloads itself every PageRefresh seconds, GET /status.json
// the JSON of `migrate status --json`. Every request reads the state anew
// through Read; nothing is cached, nothing can be changed from the page.
type Page struct {
	// Read reads the plan's state (Reader.Read, or what wraps it).
	Read func(ctx context.Context) (*Status, error)
	// Plan names the plan in the title of a page whose state could not
	// be read.
	Plan string
	// Timeout bounds one Read (0: PageTimeout): a page that cannot be
	// read says so rather than hanging the browser.
	Timeout time.Duration
}

// ServeHTTP answers GET and HEAD of / and /status.json; 405 to any other
// method, 404 to any other path, 503 with the error when the state
// cannot be read.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed: the status page is read-only", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path != "/" && r.URL.Path != "/status.json" {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), cmp.Or(p.Timeout, PageTimeout))
	defer cancel()
	st, err := p.Read(ctx)
	if err == nil && st == nil {
		err = errors.New("status: no state read")
	}
	var body bytes.Buffer
	var code int
	if r.URL.Path == "/status.json" {
		h.Set("Content-Type", "application/json")
		code, err = writeStatusJSON(&body, st, err)
	} else {
		h.Set("Content-Type", "text/html; charset=utf-8")
		code, err = p.writeHTML(&body, st, err, time.Now())
	}
	if err != nil { // the encoding, not the read: a bug
		http.Error(w, "500 internal error: the status could not be rendered", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	w.WriteHeader(code)
	_, _ = w.Write(body.Bytes())
}

// writeStatusJSON writes st as WriteJSON does, or, when it could not be
// read (readErr), {"error": "…"}; it returns the response's status code.
func writeStatusJSON(w io.Writer, st *Status, readErr error) (int, error) {
	if readErr != nil {
		return http.StatusServiceUnavailable, json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{hideURLs(readErr.Error())})
	}
	return http.StatusOK, WriteJSON(w, st)
}

// writeHTML writes the page of st, read at at, or the page of readErr;
// it returns the response's status code.
func (p *Page) writeHTML(w io.Writer, st *Status, readErr error, at time.Time) (int, error) {
	v := pageView{Name: p.Plan, ReadAt: at.UTC(), Refresh: PageRefresh, CSS: template.CSS(pageCSS)}
	code := http.StatusOK
	if readErr != nil {
		code, v.Err = http.StatusServiceUnavailable, hideURLs(readErr.Error())
	} else {
		v.Status, v.Name = st, st.Plan
	}
	return code, pageTmpl.Execute(w, v)
}

// pageView is what page.html renders: the state read (nil when it could
// not be), or the error.
type pageView struct {
	*Status
	Name    string // the plan's
	ReadAt  time.Time
	Refresh int
	CSS     template.CSS
	Err     string
}

// Halted are the halted shards, which the page lists first.
func (v pageView) Halted() []ShardStatus {
	var out []ShardStatus
	for _, s := range v.Tables {
		if s.State == "halted" {
			out = append(out, s)
		}
	}
	return out
}

// Count is the plan's shards: done, and all of them.
func (v pageView) Count() (c struct{ Done, All int }) {
	for _, t := range v.Totals {
		c.Done, c.All = c.Done+t.ShardsDone, c.All+t.Shards
	}
	return c
}

// Takeovers are the shards taken over, with their last takeover.
func (v pageView) Takeovers() []shardTakeover {
	var out []shardTakeover
	for _, s := range v.Tables {
		if tk := parseTakeover(s.LastTakeover); tk != nil {
			out = append(out, shardTakeover{ShardStatus: s, Last: *tk})
		}
	}
	return out
}

// shardTakeover is a shard and its last takeover.
type shardTakeover struct {
	ShardStatus
	Last takeover
}

// takeover is what the page shows of a takeover record (run --json
// takeovers[]): its RTO, measured, in parts and as predicted.
type takeover struct {
	Token          int64  `json:"token"`
	PreviousOwner  string `json:"previous_owner"`
	PreviousToken  int64  `json:"previous_token"`
	WaitMs         int64  `json:"wait_ms"`
	ElectMs        int64  `json:"elect_ms"`
	RecoverMs      int64  `json:"recover_ms"`
	VerifyMs       int64  `json:"verify_ms"`
	RtoMs          int64  `json:"rto_ms"`
	PredictedRtoMs int64  `json:"predicted_rto_ms"`
	ReplayedRows   int64  `json:"replayed_rows"`
	ResumedAfter   string `json:"resumed_after"`
}

// parseTakeover reads a shard's last takeover; nil when it has none (a
// record without a token is none). The page and Render show it.
func parseTakeover(raw json.RawMessage) *takeover {
	var tk takeover
	if json.Unmarshal(raw, &tk) != nil || tk.Token == 0 {
		return nil
	}
	return &tk
}

// OverPrediction is how much of the RTO the takeover spent beyond the
// predicted wait (its own work: elect, recover, verify), or less than it.
func (tk takeover) OverPrediction() string {
	d := tk.RtoMs - tk.PredictedRtoMs
	if d > 0 {
		return "+" + msText(d)
	}
	return "−" + msText(-d)
}

// urlRE matches a URL; hideURLs keeps its scheme only.
var urlRE = regexp.MustCompile(`\b([a-zA-Z][a-zA-Z0-9+.\-]*)://[^\s"'<>]*[^\s"'<>.,;:)\]]`)

// hideURLs replaces every URL in text by its scheme: errors name the
// plan's databases by their redacted DSNs, and the page, which more people
// may see than a terminal, shows none of them.
func hideURLs(text string) string {
	return urlRE.ReplaceAllString(text, "$1://…")
}

var pageFuncs = template.FuncMap{
	"rate":  Rate,
	"eta":   ETA,
	"num":   numText,
	"ms":    msText,
	"bytes": bytesText,
	"plain": hideURLs,
	"key": func(k json.RawMessage) string {
		if len(k) == 0 || string(k) == "null" {
			return "-"
		}
		return string(k)
	},
	"percent": func(done int64, est *int64) string {
		if est == nil || *est <= 0 {
			return ""
		}
		return strconv.FormatFloat(min(100, float64(done)*100/float64(*est)), 'f', 1, 64)
	},
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	// when shows a stored time (RFC 3339) as how long before the read
	// it was.
	"when": func(at time.Time, stored string) string {
		t, err := time.Parse(time.RFC3339Nano, stored)
		if err != nil {
			return stored
		}
		return agoText(at.Sub(t))
	},
	"ago":     func(at, t time.Time) string { return agoText(at.Sub(t)) },
	"list":    func(s []string) string { return cmp.Or(strings.Join(s, ", "), "-") },
	"deref":   func(p *int64) int64 { return *p },
	"derefTm": func(p *time.Time) time.Time { return *p },
}

// numText writes n with thousands separated by commas.
func numText(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// msText shows milliseconds as a duration: "850ms", "2.35s", "1m5s".
func msText(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Minute {
		d = d.Round(time.Second)
	}
	return d.String()
}

// agoText shows an age: "just now", "3s ago", "2m10s ago", "5h3m ago",
// "12 days ago".
func agoText(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Hour:
		return d.Round(time.Second).String() + " ago"
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s") + " ago"
	default:
		return fmt.Sprintf("%d days ago", d/(24*time.Hour))
	}
}
