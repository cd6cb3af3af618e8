package drill

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill cmd when the drill dies, so no holder,
// standby or redis-server outlives it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
