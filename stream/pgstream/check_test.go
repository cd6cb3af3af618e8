package pgstream

import (
	"strings"
	"testing"
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
