package dialect

import (
	"fmt"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// Token kinds.
const (
	tokWord  = iota // a keyword, a function or an unquoted identifier
	tokIdent        // a quoted identifier, val unquoted
	tokStr          // a string constant, val decoded
	tokNum
	tokOp // operators and punctuation
)

type token struct {
	kind  int
	text  string // the source text (the name for tokWord)
	val   string // tokIdent, tokStr: the value
	space bool   // whitespace before it in the source
}

// tokenize splits expr, spelled as engine e spells it.
func tokenize(s string, e plans.Engine) ([]token, error) {
	var out []token
	space := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			i++
			continue
		case c == '\'' || (c == 'E' || c == 'e') && e == plans.Postgres && i+1 < len(s) && s[i+1] == '\'' ||
			c == '"' && e == plans.MySQL:
			v, n, err := readString(s[i:], e)
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: tokStr, text: s[i : i+n], val: v, space: space})
			i += n
		case c == '"' || c == '`':
			if c == '`' && e != plans.MySQL {
				return nil, fmt.Errorf("%w: a backtick in a PostgreSQL expression", errNoTranslation)
			}
			j := i + 1
			var b strings.Builder
			for ; j < len(s); j++ {
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						b.WriteByte(c)
						j++
						continue
					}
					break
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%w: unterminated identifier in %s", errNoTranslation, s)
			}
			out = append(out, token{kind: tokIdent, text: s[i : j+1], val: b.String(), space: space})
			i = j + 1
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				(s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			out = append(out, token{kind: tokNum, text: s[i:j], space: space})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '$' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9' || s[j] >= 0x80) {
				j++
			}
			out = append(out, token{kind: tokWord, text: s[i:j], space: space})
			i = j
		default:
			n := 1
			for _, op := range []string{"::", "||", "<=>", "<>", "!=", "<=", ">=", "->>", "->", "&&", "!~~*", "!~~", "~~*", "~~", "!~*", "!~", "~*"} {
				if strings.HasPrefix(s[i:], op) {
					n = len(op)
					break
				}
			}
			out = append(out, token{kind: tokOp, text: s[i : i+n], space: space})
			i += n
		}
		space = false
	}
	return out, nil
}

// readString reads the string constant at the start of s: its value and
// its length in s.
func readString(s string, e plans.Engine) (string, int, error) {
	i, esc := 0, e == plans.MySQL
	if s[0] == 'E' || s[0] == 'e' {
		i, esc = 1, true
	}
	q := s[i]
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == q && j+1 < len(s) && s[j+1] == q:
			b.WriteByte(q)
			j++
		case c == q:
			return b.String(), j + 1, nil
		case c == '\\' && esc && j+1 < len(s):
			j++
			switch s[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'Z':
				b.WriteByte(26)
			case '%', '_':
				if e == plans.MySQL { // MySQL keeps the backslash of \% and \_
					b.WriteByte('\\')
				}
				b.WriteByte(s[j])
			default:
				if e == plans.Postgres && (s[j] >= '0' && s[j] <= '7' || s[j] == 'x' || s[j] == 'u' || s[j] == 'U') {
					return "", 0, fmt.Errorf("%w: the escape \\%c in %s", errNoTranslation, s[j], s)
				}
				b.WriteByte(s[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("%w: unterminated string in %s", errNoTranslation, s)
}
