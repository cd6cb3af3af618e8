package runner

import (
	"context"
	"fmt"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/schema"
)

// readObjects reads the source's views, materialized views, routines and
// triggers that the post-load phase creates, between two databases of
// one engine (none across engines: NotMigrated lists them): those of the
// schemas (the database) of the tables the plan copies under their own
// name. defs are the source tables' definitions, in the plan's order.
func (ps *planSetup) readObjects(ctx context.Context, defs []*dialect.TableDef) (*schema.Objects, error) {
	if ps.srcD.Engine() != ps.dstD.Engine() {
		return &schema.Objects{Created: map[string]bool{}}, nil
	}
	var names [][]string
	for i, t := range ps.plan.Tables {
		if defs[i] != nil && schema.SameName(defs[i].Name, t.TargetIdent()) {
			names = append(names, defs[i].Name)
		}
	}
	return schema.ReadObjects(ctx, ps.src, ps.srcD, names)
}

// notMigrated lists the source's objects that a run does not copy: those
// the post-load phase creates left out, those it cannot create with why.
func (ps *planSetup) notMigrated(ctx context.Context, in *sources) ([]string, error) {
	names := make([][]string, len(in.defs))
	for i, d := range in.defs {
		names[i] = d.Name
	}
	objs, err := ps.srcD.NotMigrated(ctx, ps.src, names)
	if err != nil {
		return nil, fmt.Errorf("source objects: %w", err)
	}
	reported := map[string]dialect.Object{}
	for _, o := range in.objects.Reported {
		reported[o.Key] = o
	}
	out := []string{}
	line := func(o dialect.Object) {
		s := o.Kind + " " + o.Name
		if o.Note != "" {
			s += " (" + o.Note + ")"
		}
		out = append(out, s)
	}
	for _, o := range objs {
		if o.Key != "" && in.objects.Created[o.Key] {
			continue
		}
		if rep, ok := reported[o.Key]; ok && o.Key != "" {
			o.Note = rep.Note
			delete(reported, o.Key)
		}
		line(o)
	}
	for _, o := range in.objects.Reported {
		if _, ok := reported[o.Key]; ok { // not among NotMigrated's (a trigger on a view)
			line(o)
		}
	}
	return out, nil
}
