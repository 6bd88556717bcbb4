//go:build race

package queue

// raceEnabled reports a -race build (see TestModel).
const raceEnabled = true
