package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill a child if this process dies
// without cleaning up (e.g. SIGKILL), so no server is left behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
