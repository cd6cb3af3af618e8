package drill

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// setPdeathsig makes the kernel kill cmd when the drill dies, so no holder,
// standby or redis-server outlives it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// stopped reports whether process pid is stopped by a signal: its state in
// /proc/PID/stat (after the command's name, which may hold spaces) is T.
func stopped(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndex(string(stat), ") ")
	return i >= 0 && strings.HasPrefix(string(stat[i+2:]), "T")
}
