//go:build race

package e2e

// raceEnabled builds the broker under test with -race too, so data races inside the broker
// fail the end-to-end test that provoked them.
const raceEnabled = true
