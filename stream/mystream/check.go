package mystream

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// settings are what Check reads from the server.
type settings struct {
	logBin, format, rowImage string
	expireSeconds            float64 // binlog_expire_logs_seconds, else expire_logs_days in seconds; 0: never
	expireKnown              bool
	grants                   []string // SHOW GRANTS, each line
}

// Check is the binlog capture's preconditions on the server of db, for
// `migrate validate`: one error per failed check, each with its fix. The
// binlog must be kept at least expectedCopy (the copy's expected length:
// the stream resumes from where the copy began).
func Check(ctx context.Context, db *sql.DB, expectedCopy time.Duration) []error {
	s, err := readSettings(ctx, db)
	if err != nil {
		return []error{err}
	}
	return s.check(expectedCopy)
}

func readSettings(ctx context.Context, db *sql.DB) (settings, error) {
	var s settings
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image', 'binlog_expire_logs_seconds', 'expire_logs_days')")
	if err != nil {
		return s, fmt.Errorf("mystream: read the server's binlog settings: %w", err)
	}
	vars := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			_ = rows.Close()
			return s, fmt.Errorf("mystream: read the server's binlog settings: %w", err)
		}
		vars[strings.ToLower(k)] = v
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("mystream: read the server's binlog settings: %w", err)
	}
	s.logBin, s.format, s.rowImage = vars["log_bin"], vars["binlog_format"], vars["binlog_row_image"]
	if v, ok := vars["binlog_expire_logs_seconds"]; ok {
		s.expireSeconds, err = strconv.ParseFloat(v, 64)
		s.expireKnown = err == nil
	}
	if v, ok := vars["expire_logs_days"]; ok && (!s.expireKnown || s.expireSeconds == 0) {
		if d, err := strconv.ParseFloat(v, 64); err == nil {
			s.expireSeconds, s.expireKnown = d*86400, true
		}
	}
	grows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return s, fmt.Errorf("mystream: SHOW GRANTS: %w", err)
	}
	defer func() { _ = grows.Close() }()
	for grows.Next() {
		var g string
		if err := grows.Scan(&g); err != nil {
			return s, fmt.Errorf("mystream: SHOW GRANTS: %w", err)
		}
		s.grants = append(s.grants, g)
	}
	return s, grows.Err()
}

// check is the decision on settings read.
func (s settings) check(expectedCopy time.Duration) []error {
	var errs []error
	if on := strings.ToUpper(s.logBin); on != "ON" && on != "1" {
		errs = append(errs, fmt.Errorf("mystream: the binary log is off (log_bin=%s): start the server with --log-bin", s.logBin))
	}
	if !strings.EqualFold(s.format, "ROW") {
		errs = append(errs, fmt.Errorf("mystream: binlog_format is %s, not ROW: set binlog_format=ROW in the server's configuration (and SET GLOBAL binlog_format='ROW')", s.format))
	}
	if !strings.EqualFold(s.rowImage, "FULL") {
		errs = append(errs, fmt.Errorf("mystream: binlog_row_image is %s, not FULL: set binlog_row_image=FULL in the server's configuration (and SET GLOBAL binlog_row_image='FULL')", s.rowImage))
	}
	slave, client := s.privileges()
	if !slave {
		errs = append(errs, fmt.Errorf("mystream: the user lacks the REPLICATION SLAVE privilege: GRANT REPLICATION SLAVE ON *.* TO the user"))
	}
	if !client {
		errs = append(errs, fmt.Errorf("mystream: the user lacks the REPLICATION CLIENT privilege (MariaDB: BINLOG MONITOR): GRANT REPLICATION CLIENT ON *.* TO the user"))
	}
	if s.expireKnown && s.expireSeconds > 0 && time.Duration(s.expireSeconds*float64(time.Second)) < expectedCopy {
		errs = append(errs, fmt.Errorf("mystream: the server purges binlogs after %s, less than the copy's expected %s: raise binlog_expire_logs_seconds to at least %d",
			time.Duration(s.expireSeconds*float64(time.Second)), expectedCopy, int64(expectedCopy.Seconds()+0.5)))
	}
	return errs
}

// privileges is whether the grants on *.* hold REPLICATION SLAVE and
// REPLICATION CLIENT (ALL PRIVILEGES holds both; MariaDB 10.5+ names the
// latter BINLOG MONITOR). Only the privilege list before " ON " is read.
func (s settings) privileges() (slave, client bool) {
	for _, g := range s.grants {
		up := strings.ToUpper(g)
		rest, ok := strings.CutPrefix(up, "GRANT ")
		if !ok {
			continue
		}
		privs, target, ok := strings.Cut(rest, " ON ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(target), "*.*") {
			continue
		}
		for _, p := range strings.Split(privs, ",") {
			switch strings.TrimSpace(p) {
			case "ALL PRIVILEGES", "ALL":
				slave, client = true, true
			case "REPLICATION SLAVE", "REPLICATION REPLICA":
				slave = true
			case "REPLICATION CLIENT", "BINLOG MONITOR":
				client = true
			}
		}
	}
	return slave, client
}
