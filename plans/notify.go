package plans

import (
	"encoding/json"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The run events a plan's outbox records (package outbox), in the order
// a plan's life produces them. A sink's Events filter names them, or
// globs over them ("shard.*").
var EventTypes = []string{
	"shard.taken_over", // a standby claimed a shard from a live holder (with the RTO parts)
	"shard.halted",     // automatic recovery gave up on a shard (with the reason and the command that resumes it)
	"shard.done",       // the batch that finished a shard committed
	"postload.halted",  // the post-load phase halted
	"postload.done",    // the post-load phase finished
	"table.verified",   // a table was verified (with the counts; equal or not)
	"plan.done",        // every table copied, the post-load phase done and verified
}

// Defaults of a sink.
const (
	DefaultSinkTimeout     = 10 * time.Second // one attempt (an HTTP request, a command's run)
	DefaultSinkGiveUpAfter = 24 * time.Hour   // an event pending longer is set aside, kept and reported
)

// Limits of a sink checked when a plan is read.
const (
	MinSinkTimeout     = 100 * time.Millisecond
	MaxSinkTimeout     = 10 * time.Minute
	MinSinkGiveUpAfter = time.Minute
)

// Sink is one destination of a plan's events (the plan's notify: list):
// a webhook or a command, and the event types it wants.
type Sink struct {
	// Name identifies the sink in the outbox's delivery records, status
	// and metrics: [a-z0-9_-]+, unique in the plan.
	Name string
	// Events are the event types (EventTypes) or globs over them
	// (path.Match: "shard.*") it receives; nil: every type.
	Events []string
	// Exactly one of Webhook and Command.
	Webhook *Webhook
	Command *Command
	// Timeout bounds one attempt (DefaultSinkTimeout).
	Timeout time.Duration
	// GiveUpAfter: an event still not delivered this long after it was
	// produced is no longer tried automatically; it stays in the outbox,
	// reported by status and `migrate events --pending`, and
	// `migrate events redeliver` sends it (DefaultSinkGiveUpAfter).
	GiveUpAfter time.Duration
	Line        int // where the sink starts in the plan file; 0 for none
	Column      int
}

// Kind is "webhook" or "command". With the name it is all a summary of a
// plan shows of a sink.
func (s Sink) Kind() string {
	if s.Webhook != nil {
		return "webhook"
	}
	return "command"
}

// Webhook is an HTTP POST of each event (Standard Webhooks).
type Webhook struct {
	URL string // http:// or https://
	// SecretEnv names the environment variable that holds the signing
	// secret ("whsec_" and base64, or any other text used as it is). The
	// secret itself is never in the plan; "" sends unsigned requests.
	SecretEnv string
	// Headers are sent with every request; their values may come from
	// the environment (${VAR}), so they are never printed.
	Headers map[string]string `json:"-"`
	// CAFile is a PEM file of the CAs that sign the receiver's
	// certificate, beside the system's; "" trusts the system's only.
	CAFile string
}

// Command runs a program for each event: the event's JSON on its stdin,
// its id in MIGRATE_EVENT_ID and its type in MIGRATE_EVENT_TYPE. Exit 0 is
// delivered.
type Command struct {
	Argv []string // the program and its arguments; no shell
}

// Wants reports whether the sink receives events of type typ: its Events
// filter names it or a glob over it matches (path.Match); every type
// when it has no filter.
func (s Sink) Wants(typ string) bool {
	if len(s.Events) == 0 {
		return true
	}
	for _, pat := range s.Events {
		if ok, _ := path.Match(pat, typ); ok {
			return true
		}
	}
	return false
}

// URLShown is a URL for messages (here and where a sink reports errors):
// its scheme and host, with "/…" for a path. A user and password, a query
// and a fragment may hold tokens, and so may a path (Slack's and Discord's
// webhook URLs carry theirs in it). When the text does not parse, any '@'
// is taken for the end of a user and password, wherever it is.
func URLShown(s string) string {
	s, _, _ = strings.Cut(s, "#")
	s, _, _ = strings.Cut(s, "?")
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	end := strings.IndexByte(rest, '/')
	if _, err := url.Parse(s); err != nil || end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		rest = rest[at+1:]
	}
	host, path, _ := strings.Cut(rest, "/")
	if path != "" {
		return scheme + "://" + host + "/…"
	}
	return scheme + "://" + host
}

// String describes the webhook without what may be secret: the URL
// without its user, query and fragment, the headers by name only. fmt
// uses it for a Webhook anywhere in a value it prints (%v, %+v, %s).
func (w Webhook) String() string {
	var b strings.Builder
	b.WriteString("webhook " + URLShown(w.URL))
	if w.SecretEnv != "" {
		b.WriteString(" signed with $" + w.SecretEnv)
	}
	if names := w.headerNames(); len(names) > 0 {
		b.WriteString(" headers " + strings.Join(names, ","))
	}
	if w.CAFile != "" {
		b.WriteString(" ca_file " + w.CAFile)
	}
	return b.String()
}

// GoString is String for %#v, which would otherwise print the headers'
// values.
func (w Webhook) GoString() string { return "plans.Webhook(" + strconv.Quote(w.String()) + ")" }

// MarshalJSON encodes what String shows: the URL without its user, query
// and fragment, the headers' names.
func (w Webhook) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		URL       string   `json:"url"`
		SecretEnv string   `json:"secret_env,omitempty"`
		Headers   []string `json:"headers,omitempty"`
		CAFile    string   `json:"ca_file,omitempty"`
	}{URLShown(w.URL), w.SecretEnv, w.headerNames(), w.CAFile})
}

func (w Webhook) headerNames() []string {
	names := make([]string, 0, len(w.Headers))
	for k := range w.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
