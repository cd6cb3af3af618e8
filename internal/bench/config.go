package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The directions of a copy, and the extras measured next to them: the
// words of Config.Sections (BENCH_ONLY).
var (
	Directions = []string{"pg-pg", "my-my", "pg-my", "my-pg"}
	Extras     = []string{"replay", "verify", "pgloader", "scale", "fleet", "stream"}
	// standalone are the extras that are sections of their own: listed
	// without a direction or another extra, they are all that runs.
	standalone = []string{"fleet", "stream"}
)

// ErrConfig marks a knob with a value the bench cannot use.
var ErrConfig = errors.New("invalid setting")

// Config is what to measure: the knobs of `make bench`.
type Config struct {
	Rows      int      // rows of the seeded table (>= 1000)
	Runs      int      // measurements of each figure, in alternation (>= 1)
	ScaleRows int      // > 0: also PG->PG once at this many rows, for its peak RSS
	Durable   bool     // durable commits on both servers for the length of the bench
	Sections  Sections // which directions and extras
	// The change stream (PG->PG): the rows of its table, and the row
	// changes applied by each measurement (a multiple of 10).
	StreamRows    int
	StreamChanges int
	// The fleet table: shard counts, instance counts, the plan's lease TTL.
	FleetShards    []int
	FleetInstances []int
	FleetTTL       string
}

// Sections is a choice of directions and extras (BENCH_ONLY, BENCH_FLEET).
// Listed directions run with the listed extras; no direction listed means
// all of them, no extra listed means all of them (scale only with
// Config.ScaleRows, fleet only with BENCH_FLEET, stream with pg-pg). fleet
// and stream run whenever they are listed, and listed alone (one or both)
// they are all that runs.
type Sections struct {
	dirs, extras []string
	fleet        bool // BENCH_FLEET=1
	alone        bool // only fleet or stream listed
}

// ParseSections reads a list of directions and extras separated by commas
// or spaces; fleet is BENCH_FLEET (the fleet table in a full bench).
func ParseSections(only string, fleet bool) (Sections, error) {
	s := Sections{fleet: fleet}
	for _, w := range strings.FieldsFunc(only, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch {
		case slices.Contains(Directions, w):
			s.dirs = append(s.dirs, w)
		case slices.Contains(Extras, w):
			s.extras = append(s.extras, w)
		default:
			return Sections{}, fmt.Errorf("%w: BENCH_ONLY: unknown section %q (directions: %s; extras: %s)",
				ErrConfig, w, strings.Join(Directions, " "), strings.Join(Extras, " "))
		}
	}
	if len(s.dirs) == 0 && len(s.extras) > 0 {
		s.alone = !slices.ContainsFunc(s.extras, func(e string) bool { return !slices.Contains(standalone, e) })
	}
	return s, nil
}

// Dir reports whether direction d runs.
func (s Sections) Dir(d string) bool {
	return !s.alone && (len(s.dirs) == 0 || slices.Contains(s.dirs, d))
}

// Extra reports whether extra e runs next to the directions.
func (s Sections) Extra(e string) bool {
	return len(s.extras) == 0 || slices.Contains(s.extras, e)
}

// Fleet reports whether the fleet table is measured: fleet listed, or
// BENCH_FLEET and no extra listed.
func (s Sections) Fleet() bool {
	return slices.Contains(s.extras, "fleet") || (s.fleet && s.Extra("fleet"))
}

// Stream reports whether the change stream is measured: stream listed, or
// pg-pg runs and no extra is listed.
func (s Sections) Stream() bool {
	return slices.Contains(s.extras, "stream") || (s.Dir("pg-pg") && s.Extra("stream"))
}

// Alone reports whether only the standalone sections run (the fleet table,
// the change stream): no direction, no MariaDB seed.
func (s Sections) Alone() bool { return s.alone }

// StreamBacklog is the row changes of the change stream's backlog:
// StreamChanges made a multiple of 10 (10 per source transaction).
func (c Config) StreamBacklog() int { return c.StreamChanges / 10 * 10 }

// Scale reports whether the PG->PG run at cfg.ScaleRows runs.
func (c Config) Scale() bool {
	return c.ScaleRows > 0 && c.Sections.Dir("pg-pg") && c.Sections.Extra("scale")
}

// Validate checks the knobs; the fleet's only when the fleet runs.
func (c Config) Validate() error {
	if c.Rows < 1000 {
		return fmt.Errorf("%w: BENCH_ROWS must be a number >= 1000", ErrConfig)
	}
	if c.Runs < 1 {
		return fmt.Errorf("%w: BENCH_RUNS must be a number >= 1", ErrConfig)
	}
	if c.ScaleRows < 0 {
		return fmt.Errorf("%w: BENCH_SCALE_ROWS must be a number >= 0", ErrConfig)
	}
	if c.Sections.Stream() && (c.StreamRows < 1000 || c.StreamChanges < 1000) {
		return fmt.Errorf("%w: BENCH_STREAM_ROWS and BENCH_STREAM_CHANGES must be numbers >= 1000", ErrConfig)
	}
	if !c.Sections.Fleet() {
		return nil
	}
	if len(c.FleetShards) == 0 || len(c.FleetInstances) == 0 {
		return fmt.Errorf("%w: BENCH_FLEET_SHARDS and BENCH_FLEET_INSTANCES must not be empty", ErrConfig)
	}
	if d, err := time.ParseDuration(c.FleetTTL); err != nil || d <= 0 {
		return fmt.Errorf("%w: BENCH_FLEET_TTL: %q is not a duration such as 30s", ErrConfig, c.FleetTTL)
	}
	return nil
}

// ParseCounts reads a list of numbers >= 1 separated by commas or spaces
// (BENCH_FLEET_SHARDS, BENCH_FLEET_INSTANCES); name is the knob, for errors.
func ParseCounts(name, s string) ([]int, error) {
	var out []int
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %s: %q is not a number >= 1", ErrConfig, name, w)
		}
		out = append(out, n)
	}
	return out, nil
}
