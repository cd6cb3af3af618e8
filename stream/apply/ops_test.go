package apply

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/migrate-dev/migrate/stream"
)

// model is a target as the ops leave it: per table, key -> row.
type model map[string]map[string][]any

func (m model) table(t string) map[string][]any {
	if m[t] == nil {
		m[t] = map[string][]any{}
	}
	return m[t]
}

// applyChange applies one change as the source made it: whole rows by key.
func (m model) applyChange(c stream.Change) {
	rows := m.table(c.Table)
	switch c.Op {
	case stream.Insert:
		rows[keyString(c.New[:1])] = c.New
	case stream.Update:
		delete(rows, keyString(c.Old[:1]))
		rows[keyString(c.New[:1])] = c.New
	case stream.Delete:
		delete(rows, keyString(c.Old[:1]))
	}
}

// applyOps applies a plan's ops as run does.
func (m model) applyOps(t *testing.T, ops []*op) {
	t.Helper()
	for _, o := range ops {
		rows := m.table(o.t.Name)
		switch o.kind {
		case del:
			for _, k := range o.rows {
				delete(rows, keyString(k))
			}
		case upsert:
			for _, r := range o.rows {
				if r != nil {
					rows[keyString(r[:1])] = r
				}
			}
		default:
			t.Fatalf("unexpected op %c", o.kind)
		}
	}
}

func testTables() map[[2]string]*Table {
	tables := map[[2]string]*Table{}
	for _, n := range []string{"a", "b"} {
		tables[[2]string{"s", n}] = &Table{Schema: "s", Name: n, Unit: n, Target: []string{n}, Columns: []string{"id", "v"}, Key: []string{"id"}}
	}
	return tables
}

// randomChanges are n changes of tables a and b (b only with two) over keys
// 1..keys, from the rows of start, each valid at the source (an insert of
// an absent key, an update or a delete of a present one, some updates
// changing the key).
func randomChanges(rng *rand.Rand, n, keys int, two bool, start model) []stream.Change {
	cols := []string{"id", "v"}
	live := map[string]map[int64]bool{"a": {}, "b": {}}
	for tbl, rows := range start {
		for _, r := range rows {
			live[tbl][r[0].(int64)] = true
		}
	}
	var out []stream.Change
	for i := 0; len(out) < n; i++ {
		tbl := "a"
		if two && rng.IntN(3) == 0 {
			tbl = "b"
		}
		k := int64(rng.IntN(keys) + 1)
		v := fmt.Sprintf("%s%d-%d", tbl, k, i)
		c := stream.Change{Schema: "s", Table: tbl, Columns: cols}
		switch {
		case !live[tbl][k]:
			c.Op, c.New = stream.Insert, []any{k, v}
			live[tbl][k] = true
		case rng.IntN(3) == 0:
			c.Op, c.Old, c.OldHas = stream.Delete, []any{k, nil}, []bool{true, false}
			delete(live[tbl], k)
		default:
			nk := k
			if rng.IntN(5) == 0 { // a key change, to a free key
				if f := int64(rng.IntN(keys) + 1); !live[tbl][f] {
					nk = f
				}
			}
			c.Op, c.Old, c.OldHas, c.New = stream.Update, []any{k, nil}, []bool{true, false}, []any{nk, v}
			delete(live[tbl], k)
			live[tbl][nk] = true
		}
		out = append(out, c)
	}
	return out
}

// TestPlan_sameRows: however the changes interleave, the ops of a plan (by
// key, and in source order) leave the rows the changes leave, from any
// starting rows.
func TestPlan_sameRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		two := i%2 == 1
		keys := 1 + rng.IntN(12)
		start := func() model { // the target's rows before the group: the same every time
			m, r := model{}, rand.New(rand.NewPCG(uint64(i), 0))
			for k := range int64(keys) {
				if r.IntN(2) == 0 {
					m.table("a")[keyString([]any{k + 1})] = []any{k + 1, "old"}
				}
			}
			return m
		}
		changes := randomChanges(rng, 1+rng.IntN(60), keys, two, start())
		for _, exact := range []bool{false, true} {
			p := newPlan(testTables(), exact)
			for _, c := range changes {
				if err := p.add(c); err != nil {
					t.Fatal(err)
				}
			}
			want, got := start(), start()
			for _, c := range changes {
				want.applyChange(c)
			}
			got.applyOps(t, p.ops)
			for _, tbl := range []string{"a", "b"} {
				if !maps.EqualFunc(want.table(tbl), got.table(tbl), func(x, y []any) bool { return fmt.Sprint(x) == fmt.Sprint(y) }) {
					t.Fatalf("case %d exact=%v table %s: the ops leave %v, the changes %v\nchanges: %v", i, exact, tbl, got[tbl], want[tbl], changes)
				}
			}
			if p.n != len(changes) {
				t.Errorf("n = %d, want %d", p.n, len(changes))
			}
		}
	}
}

// TestPlan_byKeyStatements: the changes of one table, however they
// interleave, are two ops (a delete, then an upsert); a change of another
// table between them starts new ones, so the order between tables stays.
func TestPlan_byKeyStatements(t *testing.T) {
	cols := []string{"id", "v"}
	ins := func(tbl string, k int64) stream.Change {
		return stream.Change{Schema: "s", Table: tbl, Op: stream.Insert, Columns: cols, New: []any{k, "x"}}
	}
	dl := func(tbl string, k int64) stream.Change {
		return stream.Change{Schema: "s", Table: tbl, Op: stream.Delete, Columns: cols, Old: []any{k, nil}, OldHas: []bool{true, false}}
	}
	kinds := func(p *plan) string {
		s := ""
		for _, o := range p.ops {
			s += fmt.Sprintf("%s%c%d ", o.t.Name, o.kind, len(o.rows))
		}
		return s
	}
	for _, tc := range []struct {
		changes   []stream.Change
		byKey, in string
	}{
		{[]stream.Change{ins("a", 1), dl("a", 5), ins("a", 2), dl("a", 6), ins("a", 3)}, "ad2 au3 ", "au1 ad1 au1 ad1 au1 "},
		{[]stream.Change{ins("a", 1), dl("a", 1), ins("a", 1)}, "ad1 au2 ", "au1 ad1 au1 "}, // the deleted row's slot stays nil
		{[]stream.Change{ins("a", 1), ins("b", 1), dl("a", 2), ins("a", 3)}, "au1 bu1 ad1 au1 ", "au1 bu1 ad1 au1 "},
		{[]stream.Change{ins("a", 1), ins("a", 1)}, "au1 ", "au1 au1 "},
	} {
		for _, exact := range []bool{false, true} {
			p := newPlan(testTables(), exact)
			for _, c := range tc.changes {
				if err := p.add(c); err != nil {
					t.Fatal(err)
				}
			}
			want := tc.byKey
			if exact {
				want = tc.in
			}
			if got := kinds(p); got != want {
				t.Errorf("exact=%v %v: ops %q, want %q", exact, tc.changes, got, want)
			}
		}
	}
}

func TestKeyString(t *testing.T) {
	distinct := [][]any{{"ab", "c"}, {"a", "bc"}, {"a b", "c"}, {int64(1)}, {"1"}, {[]byte("1")}, {int64(1), int64(23)}, {int64(12), int64(3)}, {nil}}
	seen := map[string][]any{}
	for _, k := range distinct {
		s := keyString(k)
		if other, ok := seen[s]; ok {
			t.Errorf("keys %v and %v share %q", k, other, s)
		}
		seen[s] = k
	}
	if a, b := []any{int64(7), "x"}, []any{int64(7), "x"}; keyString(a) != keyString(b) {
		t.Error("one key, two strings")
	}
}

func TestChunks(t *testing.T) {
	for _, tc := range []struct{ n, per int }{{0, 100}, {1, 100}, {700, 6553}, {5000, 6553}, {700, 100}, {3, 1}, {63, 6553}, {127, 6553}, {30, 8}} {
		rows := make([][]any, tc.n)
		var sizes []int
		total := 0
		for c := range chunks(rows, tc.per) {
			sizes = append(sizes, len(c))
			total += len(c)
			last := total == tc.n
			if (len(c)&(len(c)-1) != 0 && !(last && len(c) < smallChunk)) || len(c) > tc.per || len(c) > maxChunk {
				t.Errorf("chunks(%d, %d): a chunk of %d", tc.n, tc.per, len(c))
			}
		}
		if total != tc.n {
			t.Errorf("chunks(%d, %d) = %v: %d rows", tc.n, tc.per, sizes, total)
		}
	}
}
