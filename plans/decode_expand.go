package plans

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// expand replaces ${VAR} in a scalar's value with lookup(VAR). $${ is a
// literal ${; a bare $VAR is left alone. The result is not expanded again.
func (d *decoder) expand(tag, name string, n *yaml.Node) (string, bool) {
	s := n.Value
	if !strings.Contains(s, "${") {
		return s, true
	}
	var b strings.Builder
	ok := true
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				d.probs.add(tag, d.at(n), "%s: unterminated ${ (write $${ for a literal ${)", name)
				return "", false
			}
			v := s[i+2 : i+2+end]
			i += 2 + end + 1
			if !validVarName(v) {
				d.probs.add(tag, d.at(n), "%s: %q is not a variable name (want ${NAME}; write $${ for a literal ${)", name, v)
				ok = false
				continue
			}
			val, found := d.lookup(v)
			if !found {
				d.probs.add(tag, d.at(n), "%s: environment variable %s is not set", name, v)
				ok = false
				continue
			}
			b.WriteString(val)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), ok
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
