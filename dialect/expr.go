package dialect

import (
	"errors"
	"fmt"
	"strings"

	"github.com/migrate-dev/migrate/plans"
)

// errNoTranslation: an expression has no translation into the other
// engine; the caller reports it (Created.Notes).
var errNoTranslation = errors.New("no translation")

// translateExpr translates an expression (a default, a check, a generated
// column's, a partial index's predicate) spelled as engine from spells it
// into engine to's spelling, or returns errNoTranslation saying why.
//
// Only a small, common subset translates: column names, numbers and
// strings, comparisons and arithmetic (division aside: integer division
// differs), AND OR NOT IN IS NULL BETWEEN LIKE CASE, and a few functions
// that mean the same in both engines. PostgreSQL's casts (::type) are
// dropped, x = ANY (ARRAY[…]) becomes x IN (…), a chain a || b becomes
// CONCAT(a, b); MySQL's charset introducers (_utf8mb4'x') are dropped and
// its backslash escapes decoded. Anything else is errNoTranslation naming
// what it met.
func translateExpr(expr string, from, to plans.Engine) (string, error) {
	if from == to {
		return expr, nil
	}
	toks, err := tokenize(expr, from)
	if err != nil {
		return "", err
	}
	if from == plans.Postgres {
		if toks, err = pgToMySQLTokens(toks); err != nil {
			return "", err
		}
	} else {
		if toks, err = mysqlToPGTokens(toks); err != nil {
			return "", err
		}
	}
	return render(toks, to), nil
}

// exprKeywords are the words that mean the same in both engines.
var exprKeywords = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "null": true, "between": true, "like": true,
	"true": true, "false": true, "case": true, "when": true, "then": true, "else": true, "end": true,
	"current_date": true, "current_timestamp": true,
}

// exprFunctions are the functions that mean the same in both engines (of
// length: the source's meaning, see the two passes).
var exprFunctions = map[string]bool{
	"lower": true, "upper": true, "coalesce": true, "abs": true, "round": true, "concat": true, "char_length": true, "now": true,
}

// exprReserved are words that are no identifier: a word not in
// exprKeywords nor a function is a column unless it is one of these.
var exprReserved = map[string]bool{
	"all": true, "any": true, "some": true, "array": true, "as": true, "asc": true, "desc": true, "cast": true, "collate": true,
	"distinct": true, "exists": true, "from": true, "select": true, "interval": true, "similar": true, "escape": true,
	"ilike": true, "regexp": true, "rlike": true, "div": true, "mod": true, "xor": true, "binary": true, "using": true,
	"localtime": true, "localtimestamp": true, "current_time": true, "current_user": true, "user": true, "session_user": true,
	"unknown": true, "symmetric": true, "isnull": true, "notnull": true, "overlaps": true, "at": true, "zone": true,
	"with": true, "without": true, "time": true, "timestamp": true, "date": true, "varying": true, "precision": true,
	"default": true, "row": true, "values": true, "sounds": true, "over": true, "filter": true, "within": true,
}

// exprOps are the operators that mean the same in both engines.
var exprOps = map[string]bool{
	"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true, "+": true, "-": true, "*": true,
	"%": true, "(": true, ")": true, ",": true,
}

// checkWord vets a word: the next token tells a function.
func checkWord(toks []token, i int) (token, error) {
	t := toks[i]
	w := strings.ToLower(t.text)
	fn := i+1 < len(toks) && toks[i+1].kind == tokOp && toks[i+1].text == "("
	switch {
	case i+1 < len(toks) && toks[i+1].kind == tokStr:
		// A typed or prefixed literal (MySQL b'01', x'ff', DATE '…';
		// PostgreSQL B'01', interval '1 day'), never a column.
		return t, fmt.Errorf("%w: the literal %s %s", errNoTranslation, t.text, toks[i+1].text)
	case exprKeywords[w]:
		t.text = strings.ToUpper(w)
	case fn && exprFunctions[w]:
		t.text = w
	case fn:
		return t, fmt.Errorf("%w: function %s", errNoTranslation, t.text)
	case exprReserved[w]:
		return t, fmt.Errorf("%w: %s", errNoTranslation, t.text)
	default: // a column
		t.kind, t.val = tokIdent, t.text
	}
	return t, nil
}

func checkOp(t token) error {
	switch {
	case exprOps[t.text]:
		return nil
	case t.text == "/":
		return fmt.Errorf("%w: division (integer division differs between the engines)", errNoTranslation)
	}
	return fmt.Errorf("%w: operator %s", errNoTranslation, t.text)
}

// pgToMySQLTokens rewrites a PostgreSQL expression's tokens for MySQL.
func pgToMySQLTokens(in []token) ([]token, error) {
	var out []token
	for i := 0; i < len(in); i++ {
		t := in[i]
		switch {
		case t.kind == tokOp && t.text == "::":
			end := skipCast(in, i+1)
			if err := castDroppable(in[i+1 : end]); err != nil {
				return nil, err
			}
			i = end - 1
			continue
		case t.kind == tokOp && t.text == "=" && i+2 < len(in) && strings.EqualFold(in[i+1].text, "any") && in[i+2].text == "(":
			// x = ANY (ARRAY[a, b]) is x IN (a, b); so is PostgreSQL's
			// own spelling of a varchar column's, x = ANY ((ARRAY[a, b])::text[]).
			items, next, ok := anyArray(in, i+2)
			if !ok {
				return nil, fmt.Errorf("%w: = ANY (…)", errNoTranslation)
			}
			inner, err := pgToMySQLTokens(items)
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: tokWord, text: "IN", space: true}, token{kind: tokOp, text: "(", space: true})
			out = append(out, inner...)
			out = append(out, token{kind: tokOp, text: ")"})
			i = next - 1
			continue
		case t.kind == tokOp && (t.text == "~~" || t.text == "!~~"):
			// PostgreSQL's spelling of LIKE and NOT LIKE (case-sensitive in
			// both engines only under a binary collation: migrate's tables
			// use one).
			t = token{kind: tokWord, text: map[string]string{"~~": "LIKE", "!~~": "NOT LIKE"}[t.text], space: true}
		case t.kind == tokWord && strings.EqualFold(t.text, "length") && i+1 < len(in) && in[i+1].text == "(":
			t.text = "char_length" // PostgreSQL's length counts characters
		case t.kind == tokWord:
			var err error
			if t, err = checkWord(in, i); err != nil {
				return nil, err
			}
		case t.kind == tokOp && t.text == "||":
			// handled below, over the whole expression
		case t.kind == tokOp:
			if err := checkOp(t); err != nil {
				return nil, err
			}
		}
		out = append(out, t)
	}
	return concatChain(out)
}

// anyArray reads the ANY operand starting at the "(" in[open]: ARRAY[…]
// itself or in parentheses, with or without a cast to an array type. It
// returns the array's items and the index after the operand's ")".
func anyArray(in []token, open int) (items []token, next int, ok bool) {
	close := matching(in, open, "(", ")")
	if close < 0 {
		return nil, 0, false
	}
	body := in[open+1 : close]
	for len(body) > 0 && body[0].text == "(" { // (ARRAY[…])::text[]
		end := matching(body, 0, "(", ")")
		if end < 0 {
			return nil, 0, false
		}
		if rest := body[end+1:]; len(rest) > 0 && rest[0].text != "::" {
			return nil, 0, false
		}
		body = body[1:end]
	}
	if len(body) < 3 || !strings.EqualFold(body[0].text, "array") || body[1].text != "[" {
		return nil, 0, false
	}
	end := matching(body, 1, "[", "]")
	if end < 0 {
		return nil, 0, false
	}
	if rest := body[end+1:]; len(rest) > 0 && rest[0].text != "::" {
		return nil, 0, false
	}
	return body[2:end], close + 1, true
}

// matching is the index of the token closing the bracket at in[i], or -1.
func matching(in []token, i int, open, close string) int {
	depth := 0
	for j := i; j < len(in); j++ {
		switch in[j].text {
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// skipCast is the index after a cast's type starting at in[i].
func skipCast(in []token, i int) int {
	if i < len(in) && (in[i].kind == tokWord || in[i].kind == tokIdent) {
		i++
	}
	for i < len(in) {
		switch {
		case in[i].kind == tokOp && in[i].text == ".": // schema.type
			i += 2
		case in[i].kind == tokWord && pgTypeWords[strings.ToLower(in[i].text)]:
			i++
		case in[i].kind == tokOp && in[i].text == "(":
			for i < len(in) && in[i].text != ")" {
				i++
			}
			i++
		case in[i].kind == tokOp && in[i].text == "[" && i+1 < len(in) && in[i+1].text == "]":
			i += 2
		default:
			return i
		}
	}
	return i
}

// castDroppable: a cast to one of these types can be left out, MySQL
// converting a string or number alike where the value is used.
func castDroppable(typ []token) error {
	var words []string
	for _, t := range typ {
		if t.text == "(" {
			break
		}
		words = append(words, strings.ToLower(t.text))
	}
	name := strings.Join(words, " ")
	switch name {
	case "text", "character varying", "varchar", "character", "bpchar", "numeric", "integer", "bigint", "smallint",
		"double precision", "real", "date", "timestamp without time zone", "timestamp with time zone":
		return nil
	}
	return fmt.Errorf("%w: a cast to %s", errNoTranslation, name)
}

// pgTypeWords continue a type name of several words.
var pgTypeWords = map[string]bool{"varying": true, "precision": true, "without": true, "with": true, "time": true, "zone": true}

// concatChain turns a || b || c into CONCAT(a, b, c) when || are the
// only operators outside parentheses (PostgreSQL prints the chain
// ((a || b) || c)); any other || has no translation.
func concatChain(toks []token) ([]token, error) {
	if !hasConcat(toks) {
		return toks, nil
	}
	parts, err := chainParts(toks)
	if err != nil {
		return nil, err
	}
	out := []token{{kind: tokWord, text: "concat", space: toks[0].space}, {kind: tokOp, text: "("}}
	for i, p := range parts {
		if i > 0 {
			out = append(out, token{kind: tokOp, text: ","})
		}
		p[0].space = i > 0
		out = append(out, p...)
	}
	return append(out, token{kind: tokOp, text: ")"}), nil
}

func hasConcat(toks []token) bool {
	for _, t := range toks {
		if t.kind == tokOp && t.text == "||" {
			return true
		}
	}
	return false
}

// enclosed reports whether toks are one parenthesised group.
func enclosed(toks []token) bool {
	if len(toks) < 2 || toks[0].text != "(" || toks[len(toks)-1].text != ")" {
		return false
	}
	depth := 0
	for i, t := range toks {
		if t.kind != tokOp {
			continue
		}
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 && i < len(toks)-1 {
				return false
			}
		}
	}
	return true
}

// chainParts are the operands of a chain of ||.
func chainParts(toks []token) ([][]token, error) {
	for enclosed(toks) {
		toks = toks[1 : len(toks)-1]
	}
	var parts [][]token
	var cur []token
	depth := 0
	for _, t := range toks {
		switch {
		case t.kind == tokOp && t.text == "(":
			depth++
		case t.kind == tokOp && t.text == ")":
			depth--
		case t.kind == tokOp && t.text == "||" && depth == 0:
			parts, cur = append(parts, cur), nil
			continue
		case depth == 0 && (t.kind == tokOp && t.text != "||" || t.kind == tokWord && exprKeywords[strings.ToLower(t.text)]):
			return nil, fmt.Errorf("%w: || mixed with %s", errNoTranslation, t.text)
		}
		cur = append(cur, t)
	}
	parts = append(parts, cur)
	var out [][]token
	for _, p := range parts {
		switch {
		case len(p) == 0:
			return nil, fmt.Errorf("%w: an empty operand of ||", errNoTranslation)
		case enclosed(p) && hasConcat(p):
			inner, err := chainParts(p)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
		case hasConcat(p):
			return nil, fmt.Errorf("%w: || inside a function's arguments", errNoTranslation)
		default:
			out = append(out, p)
		}
	}
	return out, nil
}

// mysqlToPGTokens rewrites a MySQL expression's tokens for PostgreSQL.
func mysqlToPGTokens(in []token) ([]token, error) {
	var out []token
	for i := 0; i < len(in); i++ {
		t := in[i]
		w := strings.ToLower(t.text)
		call := i+2 < len(in) && in[i+1].text == "(" && in[i+2].text == ")"
		switch {
		case t.kind == tokWord && strings.HasPrefix(t.text, "_") && i+1 < len(in) && in[i+1].kind == tokStr:
			in[i+1].space = t.space // a charset introducer
			continue
		case t.kind == tokWord && call && (w == "current_timestamp" || w == "current_date"):
			out = append(out, token{kind: tokWord, text: strings.ToUpper(w), space: t.space})
			i += 2
			continue
		case t.kind == tokWord && call && w == "curdate":
			out = append(out, token{kind: tokWord, text: "CURRENT_DATE", space: t.space})
			i += 2
			continue
		case t.kind == tokWord && w == "json_valid":
			return nil, fmt.Errorf("%w: json_valid (the json type checks it)", errNoTranslation)
		case t.kind == tokWord && w == "length" && i+1 < len(in) && in[i+1].text == "(":
			t.text = "octet_length" // MySQL's length counts bytes
		case t.kind == tokWord:
			var err error
			if t, err = checkWord(in, i); err != nil {
				return nil, err
			}
		case t.kind == tokOp:
			if err := checkOp(t); err != nil {
				return nil, err
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// render spells tokens in engine e.
func render(toks []token, e plans.Engine) string {
	var b strings.Builder
	for i, t := range toks {
		if t.space && i > 0 {
			b.WriteByte(' ')
		}
		switch t.kind {
		case tokIdent:
			if e == plans.MySQL {
				b.WriteString("`" + strings.ReplaceAll(t.val, "`", "``") + "`")
			} else {
				b.WriteString(`"` + strings.ReplaceAll(t.val, `"`, `""`) + `"`)
			}
		case tokStr:
			if e == plans.MySQL {
				b.WriteString("'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(t.val) + "'")
			} else {
				b.WriteString(quoteLiteral(t.val))
			}
		default:
			b.WriteString(t.text)
		}
	}
	return b.String()
}
