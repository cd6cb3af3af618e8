package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/migrate-dev/migrate/plans"
)

// maxRetryAfter caps the wait a receiver's Retry-After is honoured for: a
// receiver asking for a day is tried again after an hour, like any other
// failure, rather than holding events back that long.
const maxRetryAfter = time.Hour

// maxDrain is how much of an answer is read (and dropped) so that its
// connection can serve the next request; a longer answer costs a new
// connection rather than an unbounded read.
const maxDrain = 64 << 10

// minRedacted is the shortest header value taken out of quoted answers
// (redacted): a shorter one ("1", "yes") is no secret, and replacing it
// would garble the quote.
const minRedacted = 6

// webhook POSTs each event to a URL.
type webhook struct {
	name string
	filter
	timeout time.Duration
	url     string // as the plan gives it, for the request only
	where   string // url without userinfo and query, for messages
	key     []byte // nil: requests are not signed
	headers http.Header
	secrets []string // header values redacted from quoted answers
	client  *http.Client
}

func newWebhook(name string, f filter, timeout time.Duration, w *plans.Webhook, lookup func(string) (string, bool)) (*webhook, error) {
	// The URL and the headers were checked with the plan (plans.validate).
	s := &webhook{name: name, filter: f, timeout: timeout, url: w.URL, where: plans.URLShown(w.URL), headers: make(http.Header)}
	var err error
	if w.SecretEnv != "" {
		secret, ok := lookup(w.SecretEnv)
		if !ok {
			return nil, fmt.Errorf("%s is not set", w.SecretEnv)
		}
		if s.key, err = Key(secret); err != nil {
			return nil, fmt.Errorf("%s: %w", w.SecretEnv, err)
		}
		s.secrets = append(s.secrets, secret)
	}
	for k, v := range w.Headers {
		s.headers.Set(k, v)
		if len(v) >= minRedacted {
			s.secrets = append(s.secrets, v)
		}
	}
	// The default transport's settings (proxy from the environment,
	// HTTP/2, idle connection limits) with, when asked, more CAs. One
	// client per sink, so its connections are kept between events.
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok { // replaced by a program embedding this package
		base = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	tr := base.Clone()
	if w.CAFile != "" {
		pool, err := loadCAs(w.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	s.client = &http.Client{
		Transport: tr,
		// A redirect is a failure (Standard Webhooks): following it would
		// send the signed event where the plan does not say, and the
		// plan's URL is what is to be fixed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// loadCAs is the system's CA pool and the certificates of the PEM file.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err) // *PathError: names the file
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system pool (not an error of the plan): the file's CAs only
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file %s: no certificate in it", file)
	}
	return pool, nil
}

func (s *webhook) Name() string { return s.name }

// Send POSTs e once. Only a 2xx answer delivers it; a redirect is not
// followed.
func (s *webhook) Send(ctx context.Context, e Event) Result {
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, s.url, bytes.NewReader(e.Body))
	if err != nil {
		// Not err: it would quote the URL. The URL was checked by New,
		// so this is not expected.
		return Result{Err: s.errorf("the request cannot be built")}
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "migrate")
	}
	// The timestamp is the attempt's, not the event's: a receiver refuses
	// a request older than its tolerance, and a retry is a new request.
	ts := time.Now().Unix()
	req.Header.Set(HeaderID, e.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	if s.key != nil {
		req.Header.Set(HeaderSignature, Sign(s.key, e.ID, ts, e.Body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// *url.Error quotes the whole URL, query included: say it again
		// without.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return Result{Err: s.errorf("no answer within %v", s.timeout)}
		}
		return Result{Err: s.errorf("%w", err)}
	}
	defer resp.Body.Close()
	quote := make([]byte, 4*maxDetail)
	n, _ := io.ReadFull(resp.Body, quote)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	return s.result(resp, quote[:n])
}

// result is what an answer means; body is the start of its body.
func (s *webhook) result(resp *http.Response, body []byte) Result {
	code := resp.StatusCode
	status := strconv.Itoa(code) + " " + http.StatusText(code)
	switch {
	case code >= 200 && code <= 299:
		return Result{}
	case code >= 300 && code <= 399:
		to := "no Location"
		if loc, err := resp.Location(); err == nil {
			to = "Location " + plans.URLShown(loc.String())
		}
		return Result{Err: s.errorf("%s (%s): redirects are not followed; set the sink's url to where the receiver is", status, to)}
	case code == http.StatusGone:
		return Result{Gone: true, Err: s.errorf("%s: the receiver wants no more events", status)}
	}
	r := Result{Err: s.errorf("%s%s", status, s.quote(body))}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		r.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return r
}

// quote is ": " and the start of a response body as one line, or "".
func (s *webhook) quote(body []byte) string {
	q := head(redacted(oneLine(body), s.secrets), maxDetail)
	if q == "" {
		return ""
	}
	return ": " + q
}

// retryAfter is the wait a Retry-After value asks for (RFC 9110 10.2.3:
// seconds, or an HTTP date), at most maxRetryAfter; 0 when v says nothing
// usable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return maxRetryAfter // digits past int64: a very long wait
	case err == nil:
		// In seconds before converting, which could overflow.
		d = time.Duration(min(max(n, 0), int64(maxRetryAfter/time.Second))) * time.Second
	default:
		if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	return max(0, min(d, maxRetryAfter))
}

func (s *webhook) errorf(format string, args ...any) error {
	return fmt.Errorf("sink %s: POST %s: "+format, append([]any{s.name, s.where}, args...)...)
}
