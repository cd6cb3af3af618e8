package dialect

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// encodeRows appends rows in a bulk text format: fields by field, tab
// separated, the token last, a row a line.
func encodeRows(buf *bytes.Buffer, cols []Column, token int64, rows [][]any, field func([]byte, any, Column) ([]byte, bool)) error {
	tok := strconv.AppendInt(nil, token, 10)
	var b []byte
	for _, row := range rows {
		b = b[:0]
		for i, v := range row {
			var ok bool
			if b, ok = field(b, v, cols[i]); !ok {
				return fmt.Errorf("%w: column %s: a %T value", ErrNotBulk, cols[i].Name, v)
			}
			b = append(b, '\t')
		}
		b = append(append(b, tok...), '\n')
		buf.Write(b)
	}
	return nil
}

// appendInteger appends v in decimal when it is an integer.
func appendInteger(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	}
	return b, false
}

// bulkNames are the column names of a bulk load: cols, then the fence.
func bulkNames(cols []Column, fence string) []string {
	names := make([]string, len(cols)+1)
	for i, c := range cols {
		names[i] = c.Name
	}
	names[len(cols)] = fence
	return names
}

// appendEscaped appends s with the backslash escapes of a bulk text format:
// a backslash doubled, and each byte of special given as \ and its letter
// in letters (the same index).
func appendEscaped(b []byte, s, special, letters string) []byte {
	for {
		i := strings.IndexAny(s, special)
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		b = append(b, '\\', letters[strings.IndexByte(special, s[i])])
		s = s[i+1:]
	}
}

// appendDateTime appends t as YYYY-MM-DD, with " hh:mm:ss[.ffffff]" when
// clock, and its UTC offset (Z or ±hh:mm) when zone; years must be 1..9999.
func appendDateTime(b []byte, t time.Time, clock, zone bool) []byte {
	y, mo, d := t.Date()
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, int(mo), 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	if !clock {
		return b
	}
	h, mi, s := t.Clock()
	b = append(b, ' ')
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	b = appendDigits(b, s, 2)
	if us := t.Nanosecond() / 1000; us > 0 {
		b = append(b, '.')
		b = appendDigits(b, us, 6)
	}
	if !zone {
		return b
	}
	_, off := t.Zone()
	switch {
	case off == 0:
		return append(b, 'Z')
	case off%60 != 0:
		return t.AppendFormat(b, "Z07:00:00")
	case off < 0:
		b, off = append(b, '-'), -off
	default:
		b = append(b, '+')
	}
	b = appendDigits(b, off/3600, 2)
	b = append(b, ':')
	return appendDigits(b, off%3600/60, 2)
}

// appendDigits appends n, zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [10]byte
	i := len(d)
	for n > 0 || i > len(d)-width {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[i:]...)
}
