//go:build !race

package policyeval_test

// See race_test.go.
const (
	raceMemory  = 0
	raceEnabled = false
)
