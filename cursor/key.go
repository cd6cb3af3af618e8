package cursor

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The tags of the key parts EncodeKey writes as a JSON object of one
// member. A part's form is never changed once written, only new forms
// added: a stored checkpoint must resume at the very key it was written at.
const (
	hexTag  = "hex"      // bytes, as hex: decodes to []byte
	textTag = "text_b64" // text that is not UTF-8, its bytes as base64 (standard, padded): decodes to string
)

// EncodeKey writes key values as a JSON array that DecodeKey reads back
// exactly. Integers and decimals keep every digit, times are RFC 3339 with
// nanoseconds in UTC, byte strings are {"hex": "..."}. Decoded values are
// strings the database converts back to the key column's type (or []byte
// for bytes, bool for booleans), so each part is written as text the
// database parses as the value read:
//   - a string that is not valid UTF-8 is {"text_b64": "..."}, its bytes in
//     base64. Drivers hand text over as the bytes the server sent: a
//     PostgreSQL SQL_ASCII database sends whatever was stored (MySQL converts
//     text to the connection's utf8mb4 and hands VARBINARY/BINARY over as
//     []byte, which is "hex"). A JSON string holds Unicode only, and
//     json.Marshal turns each bad byte into U+FFFD: the resume would start
//     after another key and skip rows. It decodes to a string, not []byte,
//     because it is bound as the driver handed it over: as text, which the
//     server compares in the column's collation.
//   - float NaN, +Inf and -Inf, which JSON numbers cannot carry, are the
//     strings "NaN", "Infinity" and "-Infinity": PostgreSQL's own text for
//     them, which it parses back for a float column (MySQL has no such
//     doubles; they never reach a MySQL key).
//
// Every other value is written byte for byte as before these two forms
// existed.
func EncodeKey(key []any) (string, error) {
	out := make([]any, len(key))
	for i, v := range key {
		switch v := v.(type) {
		case nil:
			return "", fmt.Errorf("key part %d is NULL", i+1)
		case int64:
			out[i] = json.Number(strconv.FormatInt(v, 10))
		case int32:
			out[i] = json.Number(strconv.FormatInt(int64(v), 10))
		case int:
			out[i] = json.Number(strconv.Itoa(v))
		case uint64:
			out[i] = json.Number(strconv.FormatUint(v, 10))
		case float64:
			out[i] = floatPart(v, 64)
		case float32:
			out[i] = floatPart(float64(v), 32)
		case string:
			if utf8.ValidString(v) {
				out[i] = v
			} else {
				out[i] = map[string]string{textTag: base64.StdEncoding.EncodeToString([]byte(v))}
			}
		case bool:
			out[i] = v
		case time.Time:
			out[i] = v.UTC().Format(time.RFC3339Nano)
		case []byte:
			out[i] = map[string]string{hexTag: hex.EncodeToString(v)}
		default:
			return "", fmt.Errorf("key part %d has unsupported type %T", i+1, v)
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// floatPart is a float key part: the shortest decimal that parses back to
// f at its precision, or the text PostgreSQL reads NaN and the infinities
// from.
func floatPart(f float64, bits int) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, bits))
}

// DecodeKey reads a key written by EncodeKey, by this version or any
// earlier one. Stored checkpoints need no rewrite: the earlier format is
// this one without "text_b64" and the NaN/infinity strings (every part it
// could write is written the same way now), so it decodes exactly as it
// always did, and a cursor moves to the new forms with its next batch. A
// key an earlier version stored with U+FFFD in place of bytes that were
// not UTF-8 decodes as it was stored: the bytes are lost, no rewrite could
// bring them back (`migrate verify` finds rows such a resume skipped). An
// object of any other shape is refused rather than read as empty bytes, as
// earlier versions did: none wrote one, and a form from a later version
// must not be misread.
func DecodeKey(s string) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("bad key %q: %w", s, err)
	}
	out := make([]any, len(raw))
	for i, v := range raw {
		switch v := v.(type) {
		case json.Number:
			out[i] = v.String()
		case string, bool:
			out[i] = v
		case map[string]any:
			p, err := taggedPart(v)
			if err != nil {
				return nil, fmt.Errorf("bad key %q: part %d: %w", s, i+1, err)
			}
			out[i] = p
		default:
			return nil, fmt.Errorf("bad key %q: part %d", s, i+1)
		}
	}
	return out, nil
}

// taggedPart decodes a part written as an object of one member.
func taggedPart(v map[string]any) (any, error) {
	if len(v) == 1 {
		if s, ok := v[hexTag].(string); ok {
			return hex.DecodeString(s)
		}
		if s, ok := v[textTag].(string); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		}
	}
	return nil, fmt.Errorf("an object of %d members, want {%q: string} or {%q: string}", len(v), hexTag, textTag)
}
