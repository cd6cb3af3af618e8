package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers of a request.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a request's webhook-timestamp may be from
// the receiver's clock (the Standard Webhooks libraries' default): wider
// lets a captured request be replayed for longer.
const DefaultTolerance = 5 * time.Minute

// secretPrefix marks a secret in the Standard Webhooks serialisation:
// the base64 of the key follows it.
const secretPrefix = "whsec_"

// ErrNotVerified is matched (errors.Is) by every error of Verify.
var ErrNotVerified = errors.New("notify: webhook request not verified")

// Sign is the Standard Webhooks signature header value of a request:
// "v1," and the base64 of HMAC-SHA256(key, id "." timestamp "." body).
// timestamp is the attempt's time in Unix seconds, the value of the
// webhook-timestamp header, so a receiver can refuse a replayed request.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, timestamp, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Key is the HMAC key of a secret. A secret in the Standard Webhooks form,
// "whsec_" and base64, is the decoded bytes, as the Standard Webhooks
// libraries read it, so a receiver using one of them verifies our
// signatures with the same string; any other text is used as its bytes.
// The error never holds the secret.
func Key(secret string) ([]byte, error) {
	if secret == "" {
		return nil, errors.New("the secret is empty")
	}
	enc, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		// Not err: base64's message names an offset, and a secret's
		// length is no business of a log either.
		return nil, errors.New("the secret starts with " + secretPrefix + " but what follows is not base64")
	}
	if len(key) == 0 {
		return nil, errors.New("the secret is " + secretPrefix + " and nothing after it")
	}
	return key, nil
}

// Verify checks a request as a receiver does: the webhook-id,
// webhook-timestamp and webhook-signature headers are present, the
// timestamp is within tolerance of now (DefaultTolerance when tolerance is
// 0 or less), and one of the space-separated "v1,<base64>" signatures is
// the body's under key (compared in constant time). It returns the event
// id, for the receiver to de-duplicate by: a delivery is at least once.
// Its errors match ErrNotVerified.
func Verify(key []byte, h http.Header, body []byte, tolerance time.Duration) (string, error) {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	for _, hv := range [][2]string{{HeaderID, id}, {HeaderTimestamp, ts}, {HeaderSignature, sigs}} {
		if hv[1] == "" {
			return "", fmt.Errorf("%w: no %s header", ErrNotVerified, hv[0])
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not Unix seconds", ErrNotVerified, HeaderTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compared in seconds, the header's unit, so that a request sent this
	// second is not "from the future" to a receiver whose clock is a few
	// milliseconds behind.
	now := time.Now().Unix()
	switch tol := int64(tolerance / time.Second); {
	case sec < now-tol:
		return "", fmt.Errorf("%w: %s is %ds old, more than %v", ErrNotVerified, HeaderTimestamp, now-sec, tolerance)
	case sec > now+tol:
		return "", fmt.Errorf("%w: %s is %ds ahead, more than %v", ErrNotVerified, HeaderTimestamp, sec-now, tolerance)
	}
	want := mac(key, id, sec, body)
	for _, s := range strings.Fields(sigs) {
		v, enc, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue // another scheme (v1a), or not a signature
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && hmac.Equal(got, want) {
			return id, nil
		}
	}
	return "", fmt.Errorf("%w: no v1 signature in %s matches", ErrNotVerified, HeaderSignature)
}
