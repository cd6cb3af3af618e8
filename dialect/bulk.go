package dialect

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// buffers hold the text of a batch for COPY or LOAD DATA between batches.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

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
