package main

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill toolgate if this program dies
// without stopping it (SIGKILL, a crash), so no server is left behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
