//go:build race

package broker

// raceEnabled: the race detector is on, which shadows memory and slows
// everything; tests that measure the process's memory skip that part.
const raceEnabled = true
