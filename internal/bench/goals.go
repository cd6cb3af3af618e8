package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Op is how a goal's figure must compare with its target.
type Op string

// The comparisons of goals.
const (
	AtMost  Op = "<="
	AtLeast Op = ">="
)

// Goal is one goal of issues 6 and 15: a figure (a ratio of medians measured in the
// same run, or a peak RSS), the comparison and the target.
type Goal struct {
	Label  string
	Value  Figure
	Op     Op
	Target float64
}

// Verdict is "MET", "NOT MET", or "n/a" when the figure is none.
func (g Goal) Verdict() string {
	if !g.Value.Valid {
		return "n/a"
	}
	ok := g.Value.V <= g.Target
	if g.Op == AtLeast {
		ok = g.Value.V >= g.Target
	}
	if ok {
		return "MET"
	}
	return "NOT MET"
}

// Line is one line of the report's table: the median of a key.
type Line struct {
	Key, Label string
	Rows       int   // rows copied (for rows/s)
	Bytes      int64 // the source table's size (for MB/s)
}

// Tables are the facts of the seeded sources that the report divides by.
type Tables struct {
	PGBytes, MYBytes int64  // the source table's size in each engine
	ScaleBytes       int64  // the PostgreSQL table of Config.ScaleRows rows
	StreamBytes      int64  // the change stream's table, seeded
	MYBulk           string // the MY->MY baseline as the table names it
}

// upper is a direction as the table names it: pg-my is PG->MY.
func upper(d string) string { return strings.Replace(strings.ToUpper(d), "-", "->", 1) }

// Lines are the lines of the table for the sections of cfg, in order.
func Lines(cfg Config, t Tables) []Line {
	var out []Line
	for _, d := range Directions {
		if !cfg.Sections.Dir(d) {
			continue
		}
		b := t.PGBytes
		if strings.HasPrefix(d, "my") {
			b = t.MYBytes
		}
		add := func(key, label string) { out = append(out, Line{key, label, cfg.Rows, b}) }
		switch d {
		case "pg-pg":
			add("pg-pg.copy-binary", "PG->PG  raw COPY pipe, binary")
			add("pg-pg.copy-text", "PG->PG  raw COPY pipe, text")
			add("pg-pg.copy-batches", "PG->PG  raw COPY pipe, text, 1000-row transactions")
		case "my-my":
			add("my-my.outfile-load", "MY->MY  "+t.MYBulk)
			add("my-my.export", "MY->MY    of which the export")
			add("my-my.load", "MY->MY    of which LOAD DATA")
		case "pg-my":
			add("pg.read", "PG->MY  raw read of the source")
			add("my.load", "PG->MY  raw bulk load of the target")
		case "my-pg":
			add("my.read", "MY->PG  raw read of the source")
			add("pg.load", "MY->PG  raw bulk load of the target")
		}
		L := upper(d)
		add(d+".run", L+"  migrate run")
		if cfg.Sections.Extra("replay") {
			add(d+".replay", L+"  migrate run, full replay")
		}
		if (d == "pg-pg" || d == "my-my") && cfg.Sections.Extra("verify") {
			add(d+".hash-both", L+"  hash both tables at once")
			add(d+".verify", L+"  migrate verify")
		}
		if (d == "pg-pg" || d == "my-pg") && cfg.Sections.Extra("pgloader") {
			add(d+".pgloader", L+"  pgloader")
		}
	}
	if cfg.Scale() {
		out = append(out, Line{"pg-pg.scale.run", fmt.Sprintf("PG->PG  migrate run, %d rows (once)", cfg.ScaleRows), cfg.ScaleRows, t.ScaleBytes})
	}
	return out
}

// Goals are the goals of issue 15 (issue 6's, raised) and the change
// stream's for the sections of cfg, from r.
func Goals(cfg Config, r *Results, myBulk string) []Goal {
	sec := cfg.Sections
	var out []Goal
	add := func(label string, v Figure, op Op, target float64) {
		out = append(out, Goal{label, v, op, target})
	}
	ratio := func(a, b string) Figure { return Ratio(r.Median(a), r.Median(b)) }
	if !sec.Alone() {
		out = copyGoals(cfg, r, myBulk)
	}
	if sec.Stream() {
		add("stream: applier / PostgreSQL subscription", ratio("stream.migrate", "stream.native"), AtMost, 1.5)
		add("stream: applier, changes/s", Rate(float64(cfg.StreamBacklog()), r.Median("stream.migrate")), AtLeast, 10000)
	}
	return out
}

// copyGoals are the goals of the directions and their extras.
func copyGoals(cfg Config, r *Results, myBulk string) []Goal {
	sec := cfg.Sections
	var out []Goal
	add := func(label string, v Figure, op Op, target float64) {
		out = append(out, Goal{label, v, op, target})
	}
	ratio := func(a, b string) Figure { return Ratio(r.Median(a), r.Median(b)) }
	if sec.Dir("pg-pg") {
		add("PG->PG run / binary COPY pipe", ratio("pg-pg.run", "pg-pg.copy-binary"), AtMost, 1.5)
	}
	if sec.Dir("my-my") {
		add("MY->MY run / "+myBulk, ratio("my-my.run", "my-my.outfile-load"), AtMost, 1.2)
	}
	if sec.Dir("pg-my") {
		pipe := Larger(r.Median("pg.read"), r.Median("my.load"))
		add("PG->MY run / slower of raw read, raw load", Ratio(r.Median("pg-my.run"), pipe), AtMost, 1.3)
	}
	if sec.Dir("my-pg") {
		pipe := Larger(r.Median("my.read"), r.Median("pg.load"))
		add("MY->PG run / slower of raw read, raw load", Ratio(r.Median("my-pg.run"), pipe), AtMost, 1.3)
	}
	var runs []string
	for _, d := range Directions {
		if !sec.Dir(d) {
			continue
		}
		runs = append(runs, d+".run", d+".replay")
		if sec.Extra("replay") {
			add(d+" full replay / first copy", ratio(d+".replay", d+".run"), AtMost, 2)
		}
	}
	add(fmt.Sprintf("peak RSS of migrate run, %d rows (MB)", cfg.Rows), r.MaxRSSMB(runs...), AtMost, 100)
	if cfg.Scale() {
		add(fmt.Sprintf("peak RSS of PG->PG run, %d rows (MB)", cfg.ScaleRows), r.MaxRSSMB("pg-pg.scale.run"), AtMost, 100)
	}
	for _, d := range []string{"pg-pg", "my-pg"} {
		if sec.Extra("pgloader") && sec.Dir(d) {
			add(d+" pgloader / migrate run", ratio(d+".pgloader", d+".run"), AtLeast, 3)
		}
	}
	for _, d := range []string{"pg-pg", "my-my"} {
		if sec.Extra("verify") && sec.Dir(d) {
			add(d+" verify / hash both tables at once", ratio(d+".verify", d+".hash-both"), AtMost, 1.5)
		}
	}
	return out
}

// target is a goal's target as the report writes it: "<= 1.5".
func (g Goal) target() string { return string(g.Op) + " " + strconv.FormatFloat(g.Target, 'g', -1, 64) }
