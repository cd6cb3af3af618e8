package plans

// The one redaction routine of the project (SPEC §3: a password in a DSN
// never appears in any output, log line, error or report). secretSpans
// finds where the passwords of a connection string are; DSN.Redacted puts
// the marker in their places, Secrets hands them out, and Redact takes them
// out of any other text, in whatever form printing put them in.

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// span is the byte range [start, end) of a secret in a connection string,
// and how the string encodes it.
type span struct {
	start, end int
	enc        encoding
}

// encoding is how a connection string writes a secret.
type encoding int

const (
	literal   encoding = iota // as is (the go-sql-driver form's userinfo)
	userinfo                  // a URL's userinfo: %-escapes
	queryPart                 // a query value: %-escapes, '+' for a space
)

// secretSpans returns where s holds secrets, read the way ParseDSN reads it:
// the password of the userinfo (after its first ':'; an empty one too) and
// the values of credential-like query parameters (password=, pass=,
// sentinel_password=, token=, …, see isSecretParam), in the order they
// appear. s is a URL when it starts with a scheme and "://", else the
// go-sql-driver/mysql form user:pass@net(addr)/db?params.
func secretSpans(s string) []span {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !isSchemeToken(scheme) {
		return nativeSpans(s)
	}
	from := len(scheme) + len("://")
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	var out []span
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if c := strings.Index(rest[:at], ":"); c >= 0 {
			out = append(out, span{from + c + 1, from + at, userinfo})
		}
	}
	if q := strings.Index(rest[end:], "?"); q >= 0 {
		out = append(out, querySpans(s, from+end+q+1)...)
	}
	return out
}

// nativeSpans is secretSpans of the go-sql-driver/mysql form, split the way
// the driver does: the last '/', the last '@' before it, the first ':'.
func nativeSpans(s string) []span {
	left, right := s, len(s)
	if slash := strings.LastIndex(s, "/"); slash >= 0 {
		left, right = s[:slash], slash+1
	}
	var out []span
	if at := strings.LastIndex(left, "@"); at >= 0 {
		if c := strings.Index(left[:at], ":"); c >= 0 {
			out = append(out, span{c + 1, at, literal})
		}
	}
	if q := strings.Index(s[right:], "?"); q >= 0 {
		out = append(out, querySpans(s, right+q+1)...)
	}
	return out
}

// querySpans returns the values of the secret parameters of the query that
// starts at s[from:], split on '&' and ';' (see splitQuery).
func querySpans(s string, from int) []span {
	var out []span
	for i := from; i <= len(s); {
		end := len(s)
		if j := strings.IndexAny(s[i:], "&;"); j >= 0 {
			end = i + j
		}
		if k, _, ok := strings.Cut(s[i:end], "="); ok && isSecretParam(k) {
			out = append(out, span{i + len(k) + 1, end, queryPart})
		}
		i = end + 1
	}
	return out
}

// looseSpans are where a password may be in a string ParseDSN refuses, as
// other parsers (net/url, the drivers) may read it: a password with an
// unencoded '/', '?' or '#' runs to the last '@', and a query may start at
// the first '?'.
func looseSpans(s string) []span {
	start, enc := 0, literal
	if scheme, _, ok := strings.Cut(s, "://"); ok && isSchemeToken(scheme) {
		start, enc = len(scheme)+len("://"), userinfo
	}
	var out []span
	if at := strings.LastIndex(s, "@"); at > start {
		if c := strings.Index(s[start:at], ":"); c >= 0 {
			out = append(out, span{start + c + 1, at, enc})
		}
	}
	if q := strings.Index(s[start:], "?"); q >= 0 {
		out = append(out, querySpans(s, start+q+1)...)
	}
	return out
}

// minPiece is the shortest piece of a loosely found password (between '/',
// '?' and '#') that Secrets returns on its own: a parser's error may quote
// one as a host, port or path.
const minPiece = 3

// Secrets returns the passwords in raw, a connection string of any of our
// forms (postgres://, mysql://, redis://, rediss://, redis+sentinel://, …
// URLs, or the go-sql-driver/mysql form user:pass@tcp(host:port)/db): the
// userinfo's password and the values of credential-like query parameters,
// each as written and decoded, longest first, without duplicates or empty
// strings. When raw is not a valid DSN (ParseDSN refuses it), it also
// returns what other parsers may take for a password, so that their errors
// can be redacted. Hand the result to Redact.
func Secrets(raw string) []string {
	s := strings.TrimSpace(raw)
	spans := secretSpans(s)
	if _, err := ParseDSN(s); err != nil {
		for _, sp := range looseSpans(s) {
			spans = append(spans, sp)
			spans = append(spans, pieces(s, sp)...)
		}
	}
	var out []string
	add := func(v string) {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, sp := range spans {
		v := s[sp.start:sp.end]
		add(v)
		add(decode(v, sp.enc))
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// pieces are the parts of s[sp] between '/', '?' and '#' that are at least
// minPiece long.
func pieces(s string, sp span) []span {
	var out []span
	for i := sp.start; i < sp.end; {
		end := sp.end
		if j := strings.IndexAny(s[i:sp.end], "/?#"); j >= 0 {
			end = i + j
		}
		if end-i >= minPiece && end-i < sp.end-sp.start {
			out = append(out, span{i, end, sp.enc})
		}
		i = end + 1
	}
	return out
}

// decode returns v as the driver reads it ("" when it does not decode).
func decode(v string, enc encoding) string {
	var d string
	var err error
	switch enc {
	case userinfo:
		d, err = url.PathUnescape(v)
	case queryPart:
		d, err = url.QueryUnescape(v)
	default:
		return v
	}
	if err != nil {
		return ""
	}
	return d
}

// Redact returns s with every occurrence of each secret replaced by
// "xxxxx", in every form printing may have put it in: as is; percent-encoded
// (wholly or in part, with upper- or lower-case hex, '+' for a space), as
// URL userinfo, queries and paths write it; and Go- or JSON-quoted (%q,
// %+q, encoding/json, slog's JSON handler), also twice over. Occurrences
// that overlap, of one secret or of several, become one "xxxxx", so no
// piece of a secret is left beside another's marker. Empty secrets are
// ignored.
func Redact(s string, secrets []string) string {
	var found []span
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		for _, m := range secretPattern(secret).FindAllStringIndex(s, -1) {
			found = append(found, span{start: m[0], end: m[1]})
		}
	}
	return redactSpans(s, found)
}

// redactSpans replaces each span of s (an empty one too) by "xxxxx";
// overlapping spans are merged first.
func redactSpans(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start < end; i++ {
			end = max(end, spans[i].end)
		}
		b.WriteString(s[last:start])
		b.WriteString(redactedPassword)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// secretPattern matches secret with each of its characters in any of the
// forms of runeForms.
func secretPattern(secret string) *regexp.Regexp {
	var b strings.Builder
	for i := 0; i < len(secret); {
		r, w := utf8.DecodeRuneInString(secret[i:])
		b.WriteString("(?:" + strings.Join(runeForms(secret[i:i+w], r == utf8.RuneError && w == 1), "|") + ")")
		i += w
	}
	return regexp.MustCompile(b.String())
}

// runeForms are the regular expressions of the ways printing may write one
// character ch (an invalid UTF-8 byte when invalid), longest first: its
// percent-encoding, '+' for a space, its Go and JSON escapes and their
// escapes in turn, and ch itself.
func runeForms(ch string, invalid bool) []string {
	var pct strings.Builder
	for _, c := range []byte(ch) {
		pct.WriteString("%" + hexDigit(c>>4) + hexDigit(c&0xf))
	}
	forms := []string{pct.String()}
	if ch == " " {
		forms = append(forms, `\+`)
	}
	quoted := []string{ch}
	for range 2 {
		for _, q := range quoted {
			for _, e := range escapes(q) {
				if !slices.Contains(quoted, e) {
					quoted = append(quoted, e)
				}
			}
		}
	}
	for _, q := range quoted {
		if invalid && q == ch {
			q = "\uFFFD" // what the regexp engine reads an invalid byte as
		}
		forms = append(forms, regexp.QuoteMeta(q))
	}
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(forms)
}

// hexDigit matches one hex digit, in either case.
func hexDigit(n byte) string {
	d := "0123456789ABCDEF"[n]
	if d < 'A' {
		return string(d)
	}
	return "[" + string(d) + string(d+'a'-'A') + "]"
}

// escapes are s inside Go quotes (%q and %+q) and inside a JSON string.
func escapes(s string) []string {
	js, _ := json.Marshal(s) // a string always marshals
	return []string{unquote(strconv.Quote(s)), unquote(strconv.QuoteToASCII(s)), unquote(string(js))}
}

func unquote(q string) string { return q[1 : len(q)-1] }
