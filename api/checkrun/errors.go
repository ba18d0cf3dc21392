package checkrun

import "errors"

var (
	// ErrLeased means another sync holds the publication's lease.
	ErrLeased = errors.New("check run publication is leased by another sync")
	// ErrTargetConflict means a run already has another check target.
	ErrTargetConflict = errors.New("run already has a different check target")
	// ErrInvalidTarget means a target is incomplete or malformed.
	ErrInvalidTarget = errors.New("invalid check target")
	// ErrProviderAnswer means the provider answered something that does not
	// describe the check we wrote; it is never stored.
	ErrProviderAnswer = errors.New("code host answered with an unexpected check run")
	// ErrNoProvider means no code-host app is configured.
	ErrNoProvider = errors.New("no code-host app configured")
	// ErrNoAppID means the app's own ID is unknown, so no check found by
	// a search can be shown to be this app's.
	ErrNoAppID = errors.New("code-host app ID unknown: cannot search for this app's checks")
)
