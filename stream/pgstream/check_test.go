package pgstream

import (
	"net/url"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/internal/testsvc"
	"github.com/migrate-dev/migrate/plans"
)

// TestCheck: a good setup passes; a table without a key, one with
// REPLICA IDENTITY NOTHING and a missing one are reported by name with
// their fix.
func TestCheck(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE good (id int PRIMARY KEY)`, `CREATE TABLE "Full" (x int)`, `ALTER TABLE "Full" REPLICA IDENTITY FULL`,
		`CREATE TABLE byidx (x int NOT NULL)`, `CREATE UNIQUE INDEX byidx_x ON byidx (x)`, `ALTER TABLE byidx REPLICA IDENTITY USING INDEX byidx_x`,
		`CREATE TABLE nokey (x int)`, `CREATE TABLE nothing (id int PRIMARY KEY)`, `ALTER TABLE nothing REPLICA IDENTITY NOTHING`)
	good := [][2]string{{"public", "good"}, {"public", "Full"}, {"public", "byidx"}}
	if errs := Check(ctxT(t), e.db, good, e.c.Slot()); errs != nil {
		t.Fatalf("good setup: %v", errs)
	}
	errs := Check(ctxT(t), e.db, append(good, [2]string{"public", "nokey"}, [2]string{"public", "nothing"}, [2]string{"public", "gone"}), e.c.Slot())
	if len(errs) != 3 {
		t.Fatalf("want 3 errors, got %v", errs)
	}
	for i, want := range []string{
		`table "public"."nokey" has no primary key: its updates and deletes cannot be captured; add a primary key, or run ALTER TABLE "public"."nokey" REPLICA IDENTITY FULL`,
		`table "public"."nothing" has REPLICA IDENTITY NOTHING`,
		`table "public"."gone" does not exist`,
	} {
		if !strings.Contains(errs[i].Error(), want) {
			t.Errorf("error %d: %v, want it to say %q", i, errs[i], want)
		}
	}
}

// TestNoPasswordInErrors: failing to connect names the DSN redacted, never
// its password.
func TestNoPasswordInErrors(t *testing.T) {
	u, err := url.Parse(testsvc.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-Pa55word"
	u.User = url.UserPassword("no_such_user_pgstream", secret)
	dsn, err := plans.ParseDSN(u.String())
	if err != nil {
		t.Fatal(err)
	}
	c := New(dsn, "nopw")
	_, err1 := c.Start(ctxT(t), [][2]string{{"public", "t"}})
	_, err2 := c.Open(ctxT(t), "0/0")
	_, _, err3 := c.Retained(ctxT(t), "")
	err4 := c.Stop(ctxT(t), false)
	for i, err := range []error{err1, err2, err3, err4} {
		if err == nil {
			t.Fatalf("call %d with an unknown user succeeded", i+1)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("call %d: the error shows the password: %v", i+1, err)
		}
	}
}
