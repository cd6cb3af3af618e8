// Package notify sends a plan's run events to its sinks: a webhook (an
// HTTP POST signed as Standard Webhooks sign it) or a command (the event
// on its stdin). A sink makes one attempt per Send; the deliverer decides
// when to try again. Delivery is at least once, so an event keeps its id
// across attempts and receivers de-duplicate by it.
//
// Nothing here prints a secret: errors name a sink, a URL without its
// userinfo and query, an environment variable, a header's name, never
// their values.
package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/migrate-dev/migrate/plans"
)

// Event is one outbox event as delivered.
type Event struct {
	ID   string    // deterministic ("evt_3f2a..."): the same on every attempt; the webhook-id header
	Type string    // one of plans.EventTypes ("shard.done")
	At   time.Time // when it was produced
	// Body is what is sent, built by the caller: the JSON
	// {"id":..., "type":..., "timestamp":..., "plan":..., "data":{...}}.
	Body []byte
}

// Result is what one attempt gave.
type Result struct {
	// Err is nil when the event was delivered: a 2xx answer, a command's
	// exit 0.
	Err error
	// RetryAfter is how long the receiver asked to be left alone
	// (Retry-After on a 429 or 503, at most maxRetryAfter); 0: it did not
	// say.
	RetryAfter time.Duration
	// Gone: the receiver answered 410 Gone, it wants no more events. The
	// sink is to be disabled, not tried again.
	Gone bool
}

// Sink is a destination of events.
type Sink interface {
	// Name is the plan's name of the sink.
	Name() string
	// Wants reports whether the sink receives events of eventType.
	Wants(eventType string) bool
	// Send makes one attempt to deliver e, bounded by the sink's timeout
	// and by ctx.
	Send(ctx context.Context, e Event) Result
}

// New builds the sink of s. lookup reads the environment
// (os.LookupEnv in production) for the webhook's secret. An error names
// the sink and what is wrong with it, never a secret.
func New(s plans.Sink, lookup func(string) (string, bool)) (Sink, error) {
	f := filter(s.Events) // its patterns are checked with the plan (plans.validate)
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = plans.DefaultSinkTimeout
	}
	var sk Sink
	var err error
	switch {
	case s.Webhook != nil && s.Command != nil:
		err = errors.New("both a webhook and a command; a sink is one of them")
	case s.Webhook != nil:
		sk, err = newWebhook(s.Name, f, timeout, s.Webhook, lookup)
	case s.Command != nil:
		sk, err = newCommand(s.Name, f, timeout, s.Command)
	default:
		err = errors.New("neither a webhook nor a command")
	}
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", s.Name, err)
	}
	return sk, nil
}

// filter is a sink's Events filter (plans.Sink.Wants).
type filter []string

// Wants reports whether an event of type t passes the filter.
func (f filter) Wants(t string) bool { return plans.Sink{Events: f}.Wants(t) }

// maxDetail bounds the receiver's words (a response body, a command's
// stderr) quoted in an error: enough to say what went wrong, not enough
// to flood a status page or a log line.
const maxDetail = 200

// oneLine is b as one line of printable text: invalid UTF-8 becomes
// U+FFFD, and each run of white space or unprintable characters (line
// breaks, escapes that would drive a terminal) becomes one space.
func oneLine(b []byte) string {
	var sb strings.Builder
	gap := false
	for _, r := range strings.ToValidUTF8(string(b), "\uFFFD") {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			gap = true
			continue
		}
		if gap && sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		gap = false
		sb.WriteRune(r)
	}
	return sb.String()
}

// head is s cut to at most n bytes at a character boundary, with "…" when
// something was cut.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// tail is the last n bytes of s at most, cut at a character boundary, with
// "…" before when something was cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…" + s[i:]
}

// redacted replaces each of secrets found in s by "xxxxx". A receiver may
// echo the request's headers in an error page; what it says is quoted in
// errors, which are stored and shown, so the values the sink sends from
// the environment are taken out again.
func redacted(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "xxxxx")
	}
	return s
}
