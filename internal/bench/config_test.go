package bench

import (
	"errors"
	"slices"
	"testing"
)

func TestParseSections(t *testing.T) {
	type want struct {
		dirs, extras []string
		fleet, alone bool
		stream       bool
	}
	all := Directions
	for _, tc := range []struct {
		only  string
		fleet bool
		want  want
	}{
		{"", false, want{all, []string{"replay", "verify", "pgloader", "scale"}, false, false, true}},
		{"", true, want{all, []string{"replay", "verify", "pgloader", "scale"}, true, false, true}},
		{"pg-pg,verify", false, want{[]string{"pg-pg"}, []string{"verify"}, false, false, false}},
		{"pg-pg verify", true, want{[]string{"pg-pg"}, []string{"verify"}, false, false, false}},
		{"my-pg", false, want{[]string{"my-pg"}, []string{"replay", "verify", "pgloader", "scale"}, false, false, false}},
		{"pg-pg", false, want{[]string{"pg-pg"}, []string{"replay", "verify", "pgloader", "scale"}, false, false, true}},
		{"replay", false, want{all, []string{"replay"}, false, false, false}},
		{"fleet", false, want{nil, nil, true, true, false}},
		{"fleet,replay", false, want{all, []string{"replay"}, true, false, false}},
		{"pg-pg,fleet", false, want{[]string{"pg-pg"}, nil, true, false, false}},
		{"stream", false, want{nil, nil, false, true, true}},
		{"stream", true, want{nil, nil, false, true, true}},
		{"stream,fleet", false, want{nil, nil, true, true, true}},
		{"my-my,stream", false, want{[]string{"my-my"}, nil, false, false, true}},
	} {
		t.Run(tc.only, func(t *testing.T) {
			s, err := ParseSections(tc.only, tc.fleet)
			if err != nil {
				t.Fatal(err)
			}
			var dirs, extras []string
			for _, d := range Directions {
				if s.Dir(d) {
					dirs = append(dirs, d)
				}
			}
			for _, e := range Extras {
				if e != "fleet" && e != "stream" && s.Extra(e) {
					extras = append(extras, e)
				}
			}
			if !slices.Equal(dirs, tc.want.dirs) || !slices.Equal(extras, tc.want.extras) {
				t.Errorf("directions %v, extras %v; want %v, %v", dirs, extras, tc.want.dirs, tc.want.extras)
			}
			if s.Fleet() != tc.want.fleet || s.Alone() != tc.want.alone || s.Stream() != tc.want.stream {
				t.Errorf("Fleet() %v, Alone() %v, Stream() %v; want %v, %v, %v", s.Fleet(), s.Alone(), s.Stream(), tc.want.fleet, tc.want.alone, tc.want.stream)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if _, err := ParseSections("pg-pg,pgpg", false); !errors.Is(err, ErrConfig) {
			t.Errorf("err = %v, want ErrConfig", err)
		}
	})
}

func TestParseCounts(t *testing.T) {
	got, err := ParseCounts("BENCH_FLEET_SHARDS", "1 2,4")
	if err != nil || !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("ParseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "1 x", "-2"} {
		if _, err := ParseCounts("BENCH_FLEET_SHARDS", bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseCounts(%q): err = %v, want ErrConfig", bad, err)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	fleet, _ := ParseSections("fleet", false)
	ok := Config{Rows: 1000, Runs: 1, FleetShards: []int{1}, FleetInstances: []int{1}, FleetTTL: "30s", Sections: fleet}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Config){
		"few rows":     func(c *Config) { c.Rows = 999 },
		"no run":       func(c *Config) { c.Runs = 0 },
		"scale":        func(c *Config) { c.ScaleRows = -1 },
		"no shards":    func(c *Config) { c.FleetShards = nil },
		"no instances": func(c *Config) { c.FleetInstances = nil },
		"ttl":          func(c *Config) { c.FleetTTL = "30" },
	} {
		t.Run(name, func(t *testing.T) {
			c := ok
			change(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
		})
	}
	t.Run("fleet knobs unused", func(t *testing.T) {
		c := Config{Rows: 1000, Runs: 1, StreamRows: 1000, StreamChanges: 1000}
		if err := c.Validate(); err != nil {
			t.Errorf("err = %v: the fleet's knobs matter only when the fleet runs", err)
		}
	})
	t.Run("stream knobs", func(t *testing.T) {
		stream, _ := ParseSections("stream", false)
		c := Config{Rows: 1000, Runs: 1, Sections: stream, StreamRows: 1000, StreamChanges: 1000}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []Config{{StreamRows: 999, StreamChanges: 1000}, {StreamRows: 1000, StreamChanges: 10}} {
			bad.Rows, bad.Runs, bad.Sections = 1000, 1, stream
			if err := bad.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("%+v: err = %v, want ErrConfig", bad, err)
			}
		}
	})
}
