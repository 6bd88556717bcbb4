//go:build !race

package main

// raceDetector reports whether this binary was built with the race detector (-race).
const raceDetector = false
