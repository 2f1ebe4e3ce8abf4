package proc

import (
	"os/exec"
	"syscall"
)

// SetParentDeathSignal makes the kernel kill the child if this program
// dies without stopping it (SIGKILL, a crash), so no server is left behind.
func SetParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
