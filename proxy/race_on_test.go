//go:build race

package proxy_test

// raceEnabled reports a build with the race detector, whose
// instrumentation changes the frames a stack is made of.
const raceEnabled = true
