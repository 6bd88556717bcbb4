//go:build race

package broker_test

// raceEnabled reports a -race build: sync.Pool then drops a random share of what is put
// back, so pooled objects are allocated again now and then.
const raceEnabled = true
