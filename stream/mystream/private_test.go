package mystream

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/migrate-dev/migrate/dialect"
	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
	"github.com/migrate-dev/migrate/stream"
)

// TestPrivateServer, on a MariaDB of its own: Check names a STATEMENT
// binlog, a MINIMAL row image and a user without the replication
// privileges; a gtid position whose binlogs were purged is not retained
// and Open says stream.ErrGone.
func TestPrivateServer(t *testing.T) {
	srv := testsvc.StartMariaDB(t, "--log-bin=mysql-bin", "--binlog-format=STATEMENT", "--binlog-row-image=MINIMAL", "--server-id=7")
	ctx := context.Background()
	root := srv.OpenRoot(t, "migrate")
	for _, q := range []string{
		"CREATE USER lim@'127.0.0.1' IDENTIFIED BY 'lim-pw'",
		"GRANT SELECT ON *.* TO lim@'127.0.0.1'",
		"CREATE TABLE k (id INT PRIMARY KEY)",
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	lim, err := plans.ParseDSN((&url.URL{Scheme: "mysql", User: url.UserPassword("lim", "lim-pw"), Host: srv.Addr(), Path: "/migrate"}).String())
	if err != nil {
		t.Fatal(err)
	}
	limPool, err := dialect.MySQL{}.Open(lim, dialect.Session{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = limPool.Close() })
	errs := Check(ctx, limPool, 0)
	var texts []string
	for _, e := range errs {
		texts = append(texts, e.Error())
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"binlog_format=ROW", "binlog_row_image=FULL", "REPLICATION SLAVE", "REPLICATION CLIENT"} {
		if !strings.Contains(all, want) {
			t.Errorf("Check lacks %q:\n%s", want, all)
		}
	}
	if len(errs) != 4 || strings.Contains(all, "lim-pw") {
		t.Fatalf("Check: %d errors:\n%s", len(errs), all)
	}

	admin, err := plans.ParseDSN(srv.AddUser(t, "adm", "adm-pw", ""))
	if err != nil {
		t.Fatal(err)
	}
	c := New(admin, "private", 0)
	t.Cleanup(func() { _ = c.Stop(ctx, false) })
	exec := func(q string) {
		t.Helper()
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("INSERT INTO k VALUES (1)")
	pos, err := c.Start(ctx, tablesOf("migrate", "k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Retained(ctx, pos); err != nil || !ok {
		t.Fatalf("Retained(%s) before the purge = %v, %v", pos, ok, err)
	}
	exec("INSERT INTO k VALUES (2)")
	exec("FLUSH BINARY LOGS")
	exec("INSERT INTO k VALUES (3)")
	exec("FLUSH BINARY LOGS")
	var file string
	var off uint32
	if file, off, err = masterStatus(ctx, root); err != nil {
		t.Fatal(err)
	}
	_ = off
	// MariaDB keeps a binlog until InnoDB's checkpoint passes its
	// transactions: purge until the oldest binlog is the current one.
	for deadline := time.Now().Add(60 * time.Second); ; {
		exec("PURGE BINARY LOGS TO '" + file + "'")
		names, _, err := binlogs(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if names[0] == file {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("binlogs %v still kept after PURGE BINARY LOGS TO %s", names, file)
		}
		exec("FLUSH ENGINE LOGS")
	}
	if _, ok, err := c.Retained(ctx, pos); err != nil || ok {
		t.Fatalf("Retained(%s) after the purge = %v, %v; want not ok", pos, ok, err)
	}
	if _, err := c.Open(ctx, pos); !errors.Is(err, stream.ErrGone) {
		t.Fatalf("Open(%s) after the purge: %v, want ErrGone", pos, err)
	}
	now, err := c.Start(ctx, tablesOf("migrate", "k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Retained(ctx, now); err != nil || !ok {
		t.Fatalf("Retained(%s), the current position = %v, %v", now, ok, err)
	}
}
