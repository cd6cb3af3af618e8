package main

// Unit tests of the CLI's own secret handling: the redaction of a panic's
// report and the warning about passwords on the command line. The
// end-to-end greps of every output are TestRun_NoSecretsInOutput and
// TestWrongPassword (e2e_nosecrets_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/migrate-dev/migrate/plans"
)

// testPassword holds characters every escaping changes: URL-reserved ones,
// '%', a space, characters JSON escapes (& < >) and Go quotes (" \).
const testPassword = `Pw:s/cr@t?x%41&+ =;<>"\!`

// passwordForms are the ways printing may render pw.
func passwordForms(pw string) map[string]string {
	userinfo := strings.TrimPrefix(url.UserPassword("", pw).String(), ":")
	js, _ := json.Marshal(pw)
	jsu, _ := json.Marshal(userinfo)
	return map[string]string{
		"raw": pw, "query-escaped": url.QueryEscape(pw), "path-escaped": url.PathEscape(pw), "userinfo": userinfo,
		"go-quoted": strconv.Quote(pw), "json": string(js), "json userinfo": string(jsu), "go-quoted userinfo": strconv.Quote(userinfo),
	}
}

func TestSecrets_PanicRedacted(t *testing.T) {
	t.Parallel()
	d, err := plans.ParseDSN("postgres://" + url.UserPassword("u", testPassword).String() + "@127.0.0.1:5432/db")
	if err != nil {
		t.Fatal(err)
	}
	if d.Password() != testPassword {
		t.Fatalf("Password() %q, want %q", d.Password(), testPassword)
	}
	rememberPasswords(d)
	var stderr bytes.Buffer
	code := guard(&stderr, func() int {
		panic(fmt.Errorf("boom with %s and %q", d.Secret(), testPassword))
	})
	out := stderr.String()
	if code != exitInternal || code <= exitHalted {
		t.Errorf("exit %d, want exitInternal (%d), above SPEC §4's codes 0-5", code, exitInternal)
	}
	if !strings.HasPrefix(out, `internal error: boom with postgres://u:xxxxx@127.0.0.1:5432/db and "xxxxx"`) ||
		!strings.Contains(out, "goroutine ") || !strings.Contains(out, "TestSecrets_PanicRedacted") {
		t.Errorf("want the redacted panic value and the stack:\n%s", out)
	}
	for name, f := range passwordForms(testPassword) {
		if strings.Contains(out, f) {
			t.Errorf("the panic report holds the password (%s form)", name)
		}
	}

	// No panic: fn's code, nothing written.
	stderr.Reset()
	if code := guard(&stderr, func() int { return exitDiff }); code != exitDiff || stderr.Len() != 0 {
		t.Errorf("guard without a panic: exit %d, stderr %q", code, stderr.String())
	}
	// A panic with an error value (not a string) is reported too.
	if code := guard(&stderr, func() int { panic(errors.New("plain")) }); code != exitInternal || !strings.HasPrefix(stderr.String(), "internal error: plain\n") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestSecrets_ArgvPasswords(t *testing.T) {
	t.Parallel()
	pg := "postgres://" + url.UserPassword("u", testPassword).String() + "@127.0.0.1:5432/db"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "plan.yaml"}, ""},
		{[]string{"--source", pg}, "source"},
		{[]string{"-source", pg, "--table", "t"}, "source"},
		{[]string{"--source=" + pg, "-target=" + pg, "--redis", "redis://:pw@127.0.0.1:6379/0"}, "source target redis"},
		{[]string{"--source", "postgres://u@127.0.0.1/db", "--redis", "redis://127.0.0.1:6379/0"}, ""},
		{[]string{"--source", "postgres://u@127.0.0.1/db?password=pw"}, "source"},
		{[]string{"--target", "u:" + testPassword + "@tcp(127.0.0.1:3306)/db"}, "target"},
		{[]string{"--target", "u:pw@tcp(127.0.0.1:3306/db"}, "target"}, // does not parse, but holds a password
		{[]string{"--target", "--source", pg}, ""},                     // --target's value is "--source", pg a stray argument
		{[]string{"--", "--source", pg}, ""},
		{[]string{"--source"}, ""},
		{[]string{"--table", "t", "--key", "id"}, ""},
	} {
		if got := strings.Join(argvPasswords(tc.args), " "); got != tc.want {
			t.Errorf("argvPasswords(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestSecrets_ArgvWarning runs validate (whose target is not reachable) in the
// plan-less form: a DSN with a password on the command line draws one
// warning naming the flags and the environment variables, never the DSN.
func TestSecrets_ArgvWarning(t *testing.T) {
	pg := "postgres://" + url.UserPassword("u", testPassword).String() + "@127.0.0.1:5432/db"
	redisURL := "redis://127.0.0.1:6379/0"
	table := []string{"--table", "items", "--key", "id"}
	validate := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(append([]string{"validate"}, args...), table...), &stdout, &stderr)
		for name, f := range passwordForms(testPassword) {
			if strings.Contains(stdout.String()+stderr.String(), f) {
				t.Errorf("validate %q: output holds the password (%s form):\n%s%s", args, name, stdout.String(), stderr.String())
			}
		}
		return code, stderr.String()
	}
	const warning = "migrate: warning: the password given with "

	code, stderr := validate("--source", pg, "--target="+pg, "--redis", redisURL)
	if code != exitOK || strings.Count(stderr, warning) != 1 ||
		!strings.Contains(stderr, "--source, --target on the command line") || !strings.Contains(stderr, "set MIGRATE_SOURCE, MIGRATE_TARGET in the environment") ||
		!strings.Contains(stderr, "plan file") || strings.Contains(stderr, "127.0.0.1") {
		t.Errorf("passwords on the command line: exit %d, want 0 and one warning naming the flags:\n%s", code, stderr)
	}
	// The invalid command still warns: the password is on the command line.
	if code, stderr := validate("--source", pg, "--bogus"); code != exitUsage || strings.Count(stderr, warning) != 1 {
		t.Errorf("with a usage error: exit %d, want 2 and the warning:\n%s", code, stderr)
	}
	if code, stderr := validate("--source", "postgres://u@127.0.0.1/db", "--target", "postgres://u@127.0.0.1/db", "--redis", redisURL); code != exitOK || strings.Contains(stderr, warning) {
		t.Errorf("no passwords: exit %d, want 0 and no warning:\n%s", code, stderr)
	}
	// From the environment: nothing on the command line to warn about.
	t.Setenv("MIGRATE_SOURCE", pg)
	t.Setenv("MIGRATE_TARGET", pg)
	t.Setenv("MIGRATE_REDIS", "redis://"+url.UserPassword("", testPassword).String()+"@127.0.0.1:6379/0")
	if code, stderr := validate(); code != exitOK || strings.Contains(stderr, warning) {
		t.Errorf("DSNs in the environment: exit %d, want 0 and no warning:\n%s", code, stderr)
	}
}
