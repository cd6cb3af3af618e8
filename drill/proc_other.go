//go:build !linux

package drill

import (
	"os/exec"
	"time"
)

// setPdeathsig is Linux-only; elsewhere the drill's context still kills its
// children when it ends normally or by a signal.
func setPdeathsig(*exec.Cmd) {}

// stopped cannot read a process's state here: a process that wrote that
// it reached a fault point stops itself right after, so a moment's wait
// stands in for the check.
func stopped(int) bool {
	time.Sleep(100 * time.Millisecond)
	return true
}
