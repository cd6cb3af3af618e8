//go:build !linux

package drill

import "os/exec"

// setPdeathsig is Linux-only; elsewhere the drill's context still kills its
// children when it ends normally or by a signal.
func setPdeathsig(*exec.Cmd) {}
