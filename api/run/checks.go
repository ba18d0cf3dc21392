package run

// CodeHostSourceOf is the code-host source a run pinned in its input
// snapshot, nil for uploaded runs (package checkrun publishes on its
// commit).
func CodeHostSourceOf(r Run) *CodeHostSource { return codeHostSourceOf(r) }
