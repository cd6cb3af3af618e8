package notify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

// env is a lookup over a map, for New.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestSink_Wants(t *testing.T) {
	for _, tc := range []struct {
		events []string
		want   []string // the types wanted, of plans.EventTypes
	}{
		{nil, plans.EventTypes},
		{[]string{}, plans.EventTypes},
		{[]string{"shard.*"}, []string{"shard.taken_over", "shard.halted", "shard.done"}},
		{[]string{"*.halted"}, []string{"shard.halted", "postload.halted"}},
		{[]string{"plan.done", "table.verified"}, []string{"table.verified", "plan.done"}},
		{[]string{"*.done", "shard.halted"}, []string{"shard.halted", "shard.done", "postload.done", "plan.done"}},
		{[]string{"*"}, plans.EventTypes},
	} {
		s, err := New(plans.Sink{Name: "s", Events: tc.events, Command: &plans.Command{Argv: []string{"true"}}}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, typ := range plans.EventTypes {
			if s.Wants(typ) {
				got = append(got, typ)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("events %q: wants %q, want %q", tc.events, got, tc.want)
		}
	}
}

func TestNew_Errors(t *testing.T) {
	dir := t.TempDir()
	noCert := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(noCert, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_bm90IGEgcmVhbCBzZWNyZXQsIGJ1dCBsb25nIGVub3VnaA=="
	hook := func(w plans.Webhook) plans.Sink { return plans.Sink{Name: "ops", Webhook: &w} }
	for _, tc := range []struct {
		name  string
		sink  plans.Sink
		env   map[string]string
		wants string // in the error
	}{
		{"Neither", plans.Sink{Name: "ops"}, nil, "sink ops: neither a webhook nor a command"},
		{"Both", plans.Sink{Name: "ops", Webhook: &plans.Webhook{URL: "http://x/"}, Command: &plans.Command{Argv: []string{"true"}}}, nil, "sink ops: both"},
		{"SecretNotSet", hook(plans.Webhook{URL: "https://h/x", SecretEnv: "MIGRATE_OPS_SECRET"}), nil, "sink ops: MIGRATE_OPS_SECRET is not set"},
		{"SecretNotBase64", hook(plans.Webhook{URL: "https://h/x", SecretEnv: "MIGRATE_OPS_SECRET"}), map[string]string{"MIGRATE_OPS_SECRET": secret + "!"}, "sink ops: MIGRATE_OPS_SECRET: the secret starts with whsec_ but what follows is not base64"},
		{"NoCertificate", hook(plans.Webhook{URL: "https://h/x", CAFile: noCert}), nil, "sink ops: ca_file " + noCert + ": no certificate in it"},
		{"NoCAFile", hook(plans.Webhook{URL: "https://h/x", CAFile: filepath.Join(dir, "nothing.pem")}), nil, "sink ops: ca_file: open " + filepath.Join(dir, "nothing.pem")},
		{"NoProgram", plans.Sink{Name: "ops", Command: &plans.Command{}}, nil, "sink ops: command: no program"},
		{"ProgramNotFound", plans.Sink{Name: "ops", Command: &plans.Command{Argv: []string{"migrate-no-such-program"}}}, nil, "sink ops: command: exec: \"migrate-no-such-program\": executable file not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.sink, env(tc.env))
			if err == nil {
				t.Fatalf("New = %v, want an error", s)
			}
			if !strings.Contains(err.Error(), tc.wants) {
				t.Errorf("New: %v; want %q", err, tc.wants)
			}
			for _, secret := range []string{secret, "t0k3n", "pa55w0rd"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("New: %v: holds %q", err, secret)
				}
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "",
		"  one\r\ntwo\tthree  \n":       "one two three",
		"bell\a and \x1b[31mred\x1b[0m": "bell and [31mred [0m",
		"bad \xff utf-8":                "bad \uFFFD utf-8",
	} {
		if got := oneLine([]byte(in)); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
	if got := head("ééé", 3); got != "é…" {
		t.Errorf("head = %q", got)
	}
	if got := tail("ééé", 3); got != "…é" {
		t.Errorf("tail = %q", got)
	}
}
