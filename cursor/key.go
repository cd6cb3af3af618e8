package cursor

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// EncodeKey writes key values as a JSON array. Integers and decimals keep
// every digit, times are RFC 3339 with nanoseconds in UTC, byte strings are
// {"hex": "..."}. Decoded values are strings the database converts back to
// the key column's type.
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
			out[i] = json.Number(strconv.FormatFloat(v, 'g', -1, 64))
		case string, bool:
			out[i] = v
		case time.Time:
			out[i] = v.UTC().Format(time.RFC3339Nano)
		case []byte:
			out[i] = map[string]string{"hex": hex.EncodeToString(v)}
		default:
			return "", fmt.Errorf("key part %d has unsupported type %T", i+1, v)
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// DecodeKey reads a key written by EncodeKey.
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
			h, _ := v["hex"].(string)
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("bad key %q: %w", s, err)
			}
			out[i] = b
		default:
			return nil, fmt.Errorf("bad key %q: part %d", s, i+1)
		}
	}
	return out, nil
}
