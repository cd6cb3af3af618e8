package bench

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("report differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func testEnv() Environment {
	return Environment{
		Date: time.Date(2026, 12, 1, 21, 30, 5, 0, time.UTC), BuildRev: "0fa1ae5",
		Cores: 2, MemBytes: 24 << 30, PGVersion: "15.18", PGFsync: "on", PGSync: "on",
		MYVersion: "10.11.19", MYFlush: "1", Redis: "7.0.15",
		MYFiles: "SELECT INTO OUTFILE + LOAD DATA INFILE (in /tmp/migrate-services/mysql-files)",
	}
}

// record adds one sample per run of key, with seconds s[i] in run i+1.
func record(r *Results, key string, rssMB int64, s ...float64) {
	for i, v := range s {
		r.Record(key, Sample{Run: i + 1, Seconds: v, RSSKB: rssMB * 1024})
	}
}

func fleetSample(s, n, run int, wall, cp float64, rows ...string) FleetSample {
	return FleetSample{Shards: s, Instances: n, Run: run, Wall: wall, Copy: cp, Rows: rows,
		Commands: []CommandCount{{"evalsha", int64(10 * s)}, {"hset", int64(4 * s * n)}, {"pttl", int64(n)}}}
}

func TestReport_Write_full(t *testing.T) {
	sec, _ := ParseSections("", true)
	cfg := Config{Rows: 1000000, Runs: 3, ScaleRows: 10000000, Durable: true, Sections: sec,
		FleetShards: []int{1, 2}, FleetInstances: []int{1, 2}, FleetTTL: "30s", StreamRows: 100000, StreamChanges: 200005}
	r := NewResults()
	record(r, "pg-pg.copy-binary", 0, 4.1, 3.9, 4.0)
	record(r, "pg-pg.copy-text", 0, 5.2, 5.0, 5.1)
	record(r, "pg-pg.run", 60, 5.5, 5.9, 5.4)
	record(r, "pg-pg.replay", 62, 9.9, 10.1, 10.0)
	record(r, "pg-pg.hash-both", 0, 1.0, 1.1, 0.9)
	record(r, "pg-pg.verify", 0, 1.4, 1.6, 1.5)
	r.Fail("pg-pg.pgloader", "pgloader exit 1, 0 rows in the target: 2026-12-01T21:00:00 ERROR Heap exhausted, game over.")
	record(r, "my-my.outfile-load", 0, 8, 8.4)
	record(r, "my-my.export", 0, 2, 2.2)
	record(r, "my-my.load", 0, 6, 6.2)
	record(r, "my-my.run", 70, 10.5, 11)
	r.Fail("my-my.run", "migrate run exit 1: error: lease lost")
	record(r, "my-my.replay", 71, 20.5, 21)
	record(r, "my-my.hash-both", 0, 1.2, 1.3)
	record(r, "my-my.verify", 0, 2.3, 2.1)
	record(r, "pg.read", 0, 1.5, 1.6, 1.4)
	record(r, "my.load", 0, 7.7, 7.9, 7.8)
	record(r, "pg-my.run", 64, 9, 9.5, 10)
	record(r, "pg-my.replay", 65, 18, 19, 20)
	record(r, "my.read", 0, 2, 2.1, 1.9)
	record(r, "pg.load", 0, 3, 3.2, 3.1)
	record(r, "my-pg.run", 61, 4, 4.4, 4.2)
	// my-pg.replay: not run
	record(r, "my-pg.pgloader", 290, 9, 10, 11)
	record(r, "pg-pg.scale.run", 88, 58.25)
	record(r, "stream.native", 0, 4.1, 3.6, 3.9)
	record(r, "stream.migrate", 41, 5.2, 5.0, 6.1)
	for i, cpu := range []float64{2.9, 2.7, 3.1} {
		r.samples["stream.native"][i].ServerCPU = cpu
		r.samples["stream.migrate"][i].ClientCPU, r.samples["stream.migrate"][i].ServerCPU = cpu-0.4, cpu
	}
	for run := 1; run <= 3; run++ {
		r.RecordFleet(fleetSample(1, 1, run, 12+float64(run)/10, 12+float64(run)/10-0.02, "1000000"))
		r.RecordFleet(fleetSample(2, 1, run, 10.2, 10.1, "1000000"))
		r.RecordFleet(fleetSample(2, 2, run, 12.2+float64(run), 10.2, "500000", "500000"))
	}
	r.Fail("fleet.s1.i2", "instance fleet-2 exit 4: error: fenced | token refused")
	rp := &Report{Config: cfg, Env: testEnv(), Results: r,
		Tables: Tables{PGBytes: 256000000, MYBytes: 300000000, ScaleBytes: 2560000000, StreamBytes: 25600000, MYBulk: "INTO OUTFILE + LOAD DATA"}}
	var out bytes.Buffer
	if err := rp.Write(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_full.txt", out.Bytes())
}

func TestReport_Write_sections(t *testing.T) {
	sec, _ := ParseSections("pg-my,replay", false)
	cfg := Config{Rows: 100000, Runs: 1, Sections: sec}
	r := NewResults()
	record(r, "pg.read", 0, 0.15)
	// my.load not measured: the PG->MY goal is n/a
	record(r, "pg-my.run", 30, 1.1)
	record(r, "pg-my.replay", 31, 2.4)
	rp := &Report{Config: cfg, Env: testEnv(), Results: r,
		Tables: Tables{PGBytes: 25600000, MYBytes: 30000000, MYBulk: "client export + LOAD LOCAL"}}
	rp.Env.MYFiles = "client export + LOAD DATA LOCAL INFILE (the server's secure_file_priv is NULL: restart it with scripts/services.sh for INTO OUTFILE)"
	var out bytes.Buffer
	if err := rp.Write(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_sections.txt", out.Bytes())
}

func TestReport_Write_fleetAlone(t *testing.T) {
	sec, _ := ParseSections("fleet", false)
	cfg := Config{Rows: 1000000, Runs: 1, Sections: sec, FleetShards: []int{1, 4}, FleetInstances: []int{1, 3}, FleetTTL: "3s"}
	r := NewResults()
	r.RecordFleet(fleetSample(1, 1, 1, 12.18, 12.16, "1000000"))
	r.RecordFleet(fleetSample(1, 3, 1, 11.70, 11.25, "0", "0", "1000000"))
	r.RecordFleet(fleetSample(4, 1, 1, 10.39, 10.36, "1000000"))
	r.Fail("fleet.s4.i3", "the target has 999000 rows, not 1000000")
	rp := &Report{Config: cfg, Env: testEnv(), Results: r, Tables: Tables{PGBytes: 256000000}}
	var out bytes.Buffer
	if err := rp.Write(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_fleet.txt", out.Bytes())
}

func TestReport_Write_streamAlone(t *testing.T) {
	sec, _ := ParseSections("stream", false)
	cfg := Config{Rows: 1000000, Runs: 2, Sections: sec, StreamRows: 100000, StreamChanges: 200000}
	r := NewResults()
	record(r, "stream.native", 0, 3.62, 3.70) // no CPU: the server's /proc was not readable
	r.Fail("stream.migrate", "migrate run --follow (bench-1-stream-1.follow) exited before it applied the backlog: exit 5: halted")
	rp := &Report{Config: cfg, Env: testEnv(), Results: r, Tables: Tables{StreamBytes: 25600000}}
	var out bytes.Buffer
	if err := rp.Write(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_stream.txt", out.Bytes())
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=12,usec=300,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=70\r\ncmdstat_client|setinfo:calls=2,usec=1\r\n\r\n"
	got := ParseCommandStats(info)
	want := map[string]int64{"evalsha": 12, "info": 7, "client|setinfo": 2}
	if len(got) != len(want) {
		t.Fatalf("ParseCommandStats = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d calls, want %d", k, got[k], v)
		}
	}
}

func TestCommandDelta(t *testing.T) {
	before := map[string]int64{"get": 10, "set": 5, "info": 3, "del": 2}
	after := map[string]int64{"get": 14, "set": 5, "info": 9, "del": 6, "pttl": 1}
	got := CommandDelta(before, after)
	want := []CommandCount{{"del", 4}, {"get", 4}, {"pttl", 1}}
	if !slices.Equal(got, want) {
		t.Errorf("CommandDelta = %v, want %v (INFO left out, unchanged left out, most first then by name)", got, want)
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"ab→cd", 3, "ab"}, // not in the middle of "→"
		{"ab→cd", 5, "ab→"},
	} {
		if got := cut(tc.in, tc.n); got != tc.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
