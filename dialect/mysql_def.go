package dialect

import "context"

// ListTables implements Definitions.
func (m MySQL) ListTables(ctx context.Context, db Querier) ([][]string, error) { return nil, nil }

// ReadTable implements Definitions.
func (m MySQL) ReadTable(ctx context.Context, db Querier, table []string) (*TableDef, error) {
	return nil, ErrNoTable
}

// NotMigrated implements Definitions.
func (m MySQL) NotMigrated(ctx context.Context, db Querier, tables [][]string) ([]Object, error) {
	return nil, nil
}
