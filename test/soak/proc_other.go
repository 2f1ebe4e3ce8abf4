//go:build !linux

package main

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux; the
// deferred kill in run still stops toolgate on every normal exit.
func setParentDeathSignal(*exec.Cmd) {}
