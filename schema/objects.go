package schema

import (
	"context"
	"fmt"

	"github.com/migrate-dev/migrate/dialect"
)

// ObjectReader reads a source's schema objects besides tables
// (dialect.Objects).
type ObjectReader interface {
	SchemaObjects(ctx context.Context, db dialect.TxBeginner, tables [][]string) ([]dialect.SchemaObject, error)
}

// Objects are what the post-load phase of a copy between two databases
// of one engine does with the source's views, materialized views,
// functions, procedures and triggers.
type Objects struct {
	// Steps create the objects that can be, each after what it needs.
	Steps []dialect.Step
	// Created are the Keys of the objects Steps create.
	Created map[string]bool
	// Reported are those that cannot be, each with why in its Note.
	Reported []dialect.Object
}

// ReadObjects reads the source's schema objects (r) and plans them:
// tables are the source tables the plan copies under their own name.
func ReadObjects(ctx context.Context, db dialect.TxBeginner, r ObjectReader, tables [][]string) (*Objects, error) {
	objs, err := r.SchemaObjects(ctx, db, tables)
	if err != nil {
		return nil, fmt.Errorf("source views, routines and triggers: %w", err)
	}
	return PlanObjects(objs), nil
}

// PlanObjects orders objs so that each comes right after the objects it
// needs (functions before the views and triggers that call them, views
// before the views that read them), keeping their order otherwise. An
// object that needs a table the plan does not copy, or an object not
// created, is reported instead, and so is every object that needs it:
// the post-load phase would fail on it.
func PlanObjects(objs []dialect.SchemaObject) *Objects {
	out := &Objects{Created: map[string]bool{}}
	byKey := map[string]int{}
	for i, o := range objs {
		byKey[o.Key] = i
	}
	why := map[string]string{} // not created: why
	const (
		unseen = iota
		visiting
		done
	)
	state := make([]int, len(objs))
	var visit func(i int) string // why objs[i] is not created, "" when it is
	visit = func(i int) string {
		o := objs[i]
		switch state[i] {
		case visiting:
			return "its dependencies form a cycle"
		case done:
			return why[o.Key]
		}
		state[i] = visiting
		reason := ""
		for _, n := range o.Needs {
			j, known := byKey[n.Key]
			switch {
			case n.Key == "":
				reason = "needs " + n.What + ", which the plan does not copy under its own name"
			case !known:
				reason = "needs " + n.What + ", which is not created"
			default:
				if r := visit(j); r == "its dependencies form a cycle" {
					reason = r
				} else if r != "" {
					reason = "needs " + n.What + ", which is not created"
				}
			}
			if reason != "" {
				break
			}
		}
		state[i] = done
		if reason != "" {
			why[o.Key] = reason
			out.Reported = append(out.Reported, o.Object)
			out.Reported[len(out.Reported)-1].Note = reason
			return reason
		}
		out.Created[o.Key] = true
		out.Steps = append(out.Steps, o.Step)
		return ""
	}
	for i := range objs {
		visit(i)
	}
	return out
}

// SameName says whether a table is copied under its own name: target
// names the source table (its catalog name) or, unqualified, its name.
// Only such tables' views and triggers are created, their statements
// naming the source's tables.
func SameName(source, target []string) bool {
	if len(target) == 0 || len(source) == 0 || target[len(target)-1] != source[len(source)-1] {
		return false
	}
	return len(target) == 1 || len(source) == 1 || target[0] == source[0]
}
