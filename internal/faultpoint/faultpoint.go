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
	"os/signal"
	"sync"
	"syscall"
)

// Env is the variable that names the point to stop at.
const Env = "MIGRATE_FAULTPOINT"

var (
	want  = os.Getenv(Env)
	mu    sync.Mutex
	fired bool
)

// Hit stops the process if it is the point the environment names, the
// first time it is reached. The caller does not go past the point before
// the process is woken (SIGCONT), nor does any other goroutine that
// reaches it meanwhile: a process stopping itself is not stopped the
// moment it asks, and another goroutine could otherwise pass the point
// (commit its transaction, say) in between.
func Hit(name, detail string) {
	if want == "" || want != name+":"+detail {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if fired {
		return
	}
	fired = true
	woken := make(chan os.Signal, 1)
	signal.Notify(woken, syscall.SIGCONT)
	defer signal.Stop(woken)
	fmt.Fprintf(os.Stderr, "faultpoint %s reached\n", want)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-woken
}
