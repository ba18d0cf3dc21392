package trigger

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrSelf means a workspace was named as its own source.
	ErrSelf = errors.New("a workspace cannot trigger itself")
	// ErrDuplicate means the destination already has the source.
	ErrDuplicate = errors.New("the workspace already has this run trigger source")
	// ErrTooManySources means the destination already has MaxSources.
	ErrTooManySources = fmt.Errorf("a workspace has at most %d run trigger sources", MaxSources)
	// ErrCycle means the new trigger would close a loop; CycleError names it.
	ErrCycle = errors.New("the run trigger would create a cycle")
)

// CycleError is a refused trigger that would close a loop of workspaces:
// Path names them from the source back to itself.
type CycleError struct {
	Path []string
}

func (e CycleError) Error() string {
	return "the run trigger would create a cycle: " + strings.Join(e.Path, " → ")
}

// Unwrap makes a CycleError an ErrCycle.
func (e CycleError) Unwrap() error { return ErrCycle }
