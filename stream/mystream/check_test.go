package mystream

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/stream"
)

// TestCheckServer: the shared MariaDB (log-bin, ROW, FULL, a user with ALL
// PRIVILEGES, binlogs kept a day) passes.
func TestCheckServer(t *testing.T) {
	src := newSource(t)
	if errs := Check(context.Background(), src.pool, time.Hour); len(errs) != 0 {
		t.Fatalf("Check on the test server: %v", errs)
	}
	s, err := readSettings(context.Background(), src.pool)
	if err != nil {
		t.Fatal(err)
	}
	if !s.expireKnown || len(s.grants) == 0 {
		t.Fatalf("settings read: %+v", s)
	}
	// The same server, asked to keep binlogs longer than it does.
	if s.expireSeconds > 0 {
		errs := Check(context.Background(), src.pool, time.Duration(s.expireSeconds+3600)*time.Second)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "binlog_expire_logs_seconds") {
			t.Fatalf("Check with a longer copy than the retention: %v", errs)
		}
	}
}

// TestCheckDecision: each failing setting gives its own error with its fix.
func TestCheckDecision(t *testing.T) {
	good := settings{logBin: "ON", format: "ROW", rowImage: "FULL", expireSeconds: 86400, expireKnown: true,
		grants: []string{"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*ABC'"}}
	if errs := good.check(time.Hour); len(errs) != 0 {
		t.Fatalf("good settings: %v", errs)
	}
	cases := []struct {
		name  string
		edit  func(*settings)
		copy  time.Duration
		wants []string
	}{
		{"log_bin off", func(s *settings) { s.logBin = "OFF" }, time.Hour, []string{"--log-bin"}},
		{"statement format", func(s *settings) { s.format = "STATEMENT" }, time.Hour, []string{"binlog_format=ROW"}},
		{"mixed format", func(s *settings) { s.format = "MIXED" }, time.Hour, []string{"binlog_format=ROW"}},
		{"minimal image", func(s *settings) { s.rowImage = "MINIMAL" }, time.Hour, []string{"binlog_row_image=FULL"}},
		{"no grants", func(s *settings) { s.grants = []string{"GRANT USAGE ON *.* TO `u`@`%`"} }, time.Hour,
			[]string{"REPLICATION SLAVE", "REPLICATION CLIENT"}},
		{"grants on one database only", func(s *settings) {
			s.grants = []string{"GRANT ALL PRIVILEGES ON `db`.* TO `u`@`%`"}
		}, time.Hour, []string{"REPLICATION SLAVE", "REPLICATION CLIENT"}},
		{"all privileges", func(s *settings) { s.grants = []string{"GRANT ALL PRIVILEGES ON *.* TO `u`@`%` WITH GRANT OPTION"} }, time.Hour, nil},
		{"MariaDB's binlog monitor", func(s *settings) {
			s.grants = []string{"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%`"}
		}, time.Hour, nil},
		{"short retention", func(s *settings) { s.expireSeconds = 3600 }, 2 * time.Hour, []string{"binlog_expire_logs_seconds to at least 7200"}},
		{"never purged", func(s *settings) { s.expireSeconds = 0 }, 1000 * time.Hour, nil},
		{"everything wrong", func(s *settings) {
			*s = settings{logBin: "OFF", format: "STATEMENT", rowImage: "MINIMAL", expireSeconds: 60, expireKnown: true}
		}, time.Hour, []string{"--log-bin", "binlog_format=ROW", "binlog_row_image=FULL", "REPLICATION SLAVE", "REPLICATION CLIENT", "binlog_expire_logs_seconds"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.grants = append([]string(nil), good.grants...)
			tc.edit(&s)
			errs := s.check(tc.copy)
			if len(errs) != len(tc.wants) {
				t.Fatalf("errors %v, want %d", errs, len(tc.wants))
			}
			for i, w := range tc.wants {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d %q lacks %q", i, errs[i], w)
				}
				if strings.Contains(errs[i].Error(), "*ABC") {
					t.Errorf("error %d quotes the grant's password hash: %q", i, errs[i])
				}
			}
		})
	}
}

// TestGTIDRetained: a GTID position is readable while no GTID after it was
// purged.
func TestGTIDRetained(t *testing.T) {
	cases := []struct {
		flavor, pos, purged string
		ok                  bool
	}{
		{flavorMariaDB, "0-1-100", "", true},
		{flavorMariaDB, "0-1-100", "0-1-100", true},
		{flavorMariaDB, "0-1-100", "0-1-50", true},
		{flavorMariaDB, "0-1-40", "0-1-50", false},
		{flavorMariaDB, "0-1-100", "0-1-50,1-2-7", false}, // domain 1 purged, never read
		{flavorMariaDB, "0-1-100,1-2-9", "0-1-50,1-2-7", true},
		{flavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-50", true},
		{flavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-40", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-50", false},
	}
	for _, tc := range cases {
		ok, err := gtidRetained(tc.flavor, tc.pos, tc.purged)
		if err != nil || ok != tc.ok {
			t.Errorf("gtidRetained(%s, %q, purged %q) = %v, %v; want %v", tc.flavor, tc.pos, tc.purged, ok, err, tc.ok)
		}
	}
	if bytes, ok := retainedFile("b.2", []string{"b.1", "b.2", "b.3"}, []int64{10, 20, 30}); !ok || bytes != 50 {
		t.Errorf("retainedFile = %d, %v; want 50, true", bytes, ok)
	}
}

func TestPositions(t *testing.T) {
	for _, bad := range []string{"", "gtid:", "file:x", "file:x:-1", "0/16B3748", "lsn:1"} {
		if _, err := parsePos(stream.Pos(bad)); err == nil {
			t.Errorf("parsePos(%q) accepted", bad)
		}
	}
	p, err := parsePos("file:host:bin.000007:1234")
	if err != nil || p.file != "host:bin.000007" || p.off != 1234 {
		t.Fatalf("parsePos = %+v, %v", p, err)
	}
	if got := filePos(p.file, p.off); got != "file:host:bin.000007:1234" {
		t.Fatalf("filePos = %s", got)
	}
}

func TestValueHelpers(t *testing.T) {
	m, err := members("enum('a','b''c','','x,y')")
	if err != nil || !reflect.DeepEqual(m, []string{"a", "b'c", "", "x,y"}) {
		t.Fatalf("members = %q, %v", m, err)
	}
	for _, tc := range []struct {
		in   string
		fsp  int
		want string
	}{
		{"00:00:00", 3, "00:00:00.000"},
		{"-838:59:59", 0, "-838:59:59"},
		{"12:34:56.7", 3, "12:34:56.700"},
		{"01:02:03.123456", 6, "01:02:03.123456"},
		{"-00:00:01.5", 1, "-00:00:01.5"},
	} {
		got, err := formatTime(tc.in, tc.fsp)
		if err != nil || string(got) != tc.want {
			t.Errorf("formatTime(%q, %d) = %q, %v; want %q", tc.in, tc.fsp, got, err, tc.want)
		}
	}
	set := column{name: "s", kind: kSet, members: []string{"a", "b", "c"}}
	if v, err := set.convert(int64(5)); err != nil || string(v.([]byte)) != "a,c" {
		t.Fatalf("set 5 = %v, %v", v, err)
	}
	bit := column{name: "b", kind: kBit, size: 2}
	if v, err := bit.convert(int64(0x0aaa)); err != nil || !reflect.DeepEqual(v, []byte{0x0a, 0xaa}) {
		t.Fatalf("bit = %v, %v", v, err)
	}
	u64 := column{name: "u", kind: kInt, bits: 64, unsigned: true}
	if v, err := u64.convert(int64(-1)); err != nil || string(v.([]byte)) != "18446744073709551615" {
		t.Fatalf("bigint unsigned max = %v, %v", v, err)
	}
	zero, err := parseDateTime("0000-00-00 00:00:00")
	if err != nil || !reflect.DeepEqual(zero, time.Time{}) {
		t.Fatalf("zero datetime = %v, %v", zero, err)
	}
}
