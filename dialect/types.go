package dialect

import "fmt"

// MapColumns translates source column definitions into the target engine's
// types, for creating a missing target table (C4).
func MapColumns(from, to Dialect, cols []Column) ([]Column, error) {
	if from.Engine() == to.Engine() {
		return cols, nil
	}
	return nil, fmt.Errorf("dialect: type mapping %s -> %s is not supported yet", from.Engine(), to.Engine())
}
