//go:build !linux

package main

import "os/exec"

// setParentDeathSignal has no portable equivalent; children still stop
// when their stdin closes or their lifetime ends.
func setParentDeathSignal(*exec.Cmd) {}
