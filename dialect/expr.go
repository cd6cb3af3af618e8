package dialect

import (
	"errors"

	"github.com/migrate-dev/migrate/plans"
)

// errNoTranslation: an expression has no translation into the other
// engine; the caller reports it (Created.Notes).
var errNoTranslation = errors.New("no translation")

// translateExpr translates an expression (a default, a check, a generated
// column's, a partial index's predicate) spelled as engine from spells it
// into engine to's spelling, or returns errNoTranslation saying why.
func translateExpr(expr string, from, to plans.Engine) (string, error) {
	if from == to {
		return expr, nil
	}
	return "", errNoTranslation
}
