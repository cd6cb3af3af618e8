// Package faultpoint lets a test stop a migrate process at a named point of
// its work, to kill it exactly there (or wake it later, a zombie): with
// MIGRATE_FAULTPOINT=NAME:DETAIL in its environment, the first time the
// process reaches point NAME with DETAIL (an event's type, say), it writes
// "faultpoint NAME:DETAIL reached" to stderr and stops itself with SIGSTOP.
// Without the variable — always, outside tests — Hit does nothing.
package faultpoint

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Env is the variable that names the point to stop at.
const Env = "MIGRATE_FAULTPOINT"

var (
	want = os.Getenv(Env)
	once sync.Once
)

// Hit stops the process if it is the point the environment names, the
// first time it is reached.
func Hit(name, detail string) {
	if want == "" || want != name+":"+detail {
		return
	}
	once.Do(func() {
		fmt.Fprintf(os.Stderr, "faultpoint %s reached\n", want)
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	})
}
