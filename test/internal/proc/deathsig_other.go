//go:build !linux

package proc

import "os/exec"

// SetParentDeathSignal has no portable equivalent outside Linux; the
// callers' deferred stops still end their children on every normal exit.
func SetParentDeathSignal(*exec.Cmd) {}
