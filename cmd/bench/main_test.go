package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// clearEnv unsets every knob for the length of the test.
func clearEnv(t *testing.T) {
	for _, k := range []string{"BENCH_ROWS", "BENCH_RUNS", "BENCH_ONLY", "BENCH_SCALE_ROWS", "BENCH_DURABLE",
		"BENCH_FLEET", "BENCH_FLEET_SHARDS", "BENCH_FLEET_INSTANCES", "BENCH_FLEET_TTL", "BENCH_STREAM_ROWS", "BENCH_STREAM_CHANGES"} {
		t.Setenv(k, "") // restored after the test
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseFlags_defaults(t *testing.T) {
	clearEnv(t)
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rows != 1000000 || cfg.Runs != 3 || cfg.ScaleRows != 0 || !cfg.Durable || cfg.FleetTTL != "30s" ||
		cfg.StreamRows != 100000 || cfg.StreamChanges != 200000 || !cfg.Sections.Stream() {
		t.Errorf("defaults: %+v", cfg)
	}
	if !slices.Equal(cfg.FleetShards, []int{1, 2, 4}) || !slices.Equal(cfg.FleetInstances, []int{1, 2, 3}) {
		t.Errorf("fleet defaults: %v x %v", cfg.FleetShards, cfg.FleetInstances)
	}
	if cfg.Sections.Fleet() || !cfg.Sections.Dir("my-pg") {
		t.Error("default sections: every direction, no fleet")
	}
}

func TestParseFlags_env(t *testing.T) {
	clearEnv(t)
	t.Setenv("BENCH_ROWS", "100000")
	t.Setenv("BENCH_RUNS", "1")
	t.Setenv("BENCH_ONLY", "fleet")
	t.Setenv("BENCH_DURABLE", "0")
	t.Setenv("BENCH_FLEET_SHARDS", "2,8")
	t.Setenv("BENCH_FLEET_TTL", "3s")
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rows != 100000 || cfg.Runs != 1 || cfg.Durable || !cfg.Sections.Alone() ||
		!slices.Equal(cfg.FleetShards, []int{2, 8}) || cfg.FleetTTL != "3s" {
		t.Errorf("from the environment: %+v", cfg)
	}
	t.Run("a flag wins", func(t *testing.T) {
		cfg, err := parseFlags([]string{"-rows", "5000", "-only", "pg-pg"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Rows != 5000 || cfg.Sections.Alone() || !cfg.Sections.Dir("pg-pg") || cfg.Sections.Dir("my-my") {
			t.Errorf("flags over the environment: %+v", cfg)
		}
	})
	t.Run("BENCH_DURABLE set but empty is off", func(t *testing.T) {
		t.Setenv("BENCH_DURABLE", "")
		if cfg, err := parseFlags(nil, io.Discard); err != nil || cfg.Durable {
			t.Errorf("Durable = %v, %v", cfg.Durable, err)
		}
	})
}

func TestParseFlags_invalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"rows not a number", nil, map[string]string{"BENCH_ROWS": "1e6"}, "BENCH_ROWS"},
		{"too few rows", []string{"-rows", "10"}, nil, "BENCH_ROWS must be a number >= 1000"},
		{"no run", nil, map[string]string{"BENCH_RUNS": "0"}, "BENCH_RUNS must be"},
		{"unknown section", nil, map[string]string{"BENCH_ONLY": "pg-pg,fast"}, `unknown section "fast"`},
		{"durable", nil, map[string]string{"BENCH_DURABLE": "yes please"}, "BENCH_DURABLE"},
		{"fleet shards", []string{"-only", "fleet", "-fleet-shards", "1 0"}, nil, "BENCH_FLEET_SHARDS"},
		{"fleet ttl", []string{"-fleet", "1", "-fleet-ttl", "soon"}, nil, "BENCH_FLEET_TTL"},
		{"argument", []string{"pg-pg"}, nil, "unexpected argument"},
		{"stream changes", []string{"-only", "stream"}, map[string]string{"BENCH_STREAM_CHANGES": "500"}, "BENCH_STREAM_CHANGES"},
		{"stream rows", nil, map[string]string{"BENCH_STREAM_ROWS": "many"}, "BENCH_STREAM_ROWS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	t.Run("fleet knobs unused", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("BENCH_FLEET_SHARDS", "none")
		if _, err := parseFlags([]string{"-only", "pg-pg"}, io.Discard); err != nil {
			t.Errorf("err = %v: the fleet's knobs matter only when the fleet runs", err)
		}
	})
	t.Run("help", func(t *testing.T) {
		clearEnv(t)
		if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("err = %v, want flag.ErrHelp", err)
		}
	})
}
