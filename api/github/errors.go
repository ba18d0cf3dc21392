package github

import (
	"errors"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrUnconfigured: the app's ID, key or webhook secret is missing, so
	// every code-host surface fails closed.
	ErrUnconfigured = errors.New("code-host app is not configured")
	// ErrSignature: a delivery's X-Hub-Signature-256 is missing or wrong.
	ErrSignature = errors.New("delivery signature is missing or invalid")
	// ErrDeliveryConflict: a delivery ID reused with another digest, event,
	// action, provider identity or delivery kind.
	ErrDeliveryConflict = errors.New("delivery ID reused with different content")
	// ErrFenceRace: the installation changed under three consecutive
	// reads; nothing was acknowledged and the caller may retry.
	ErrFenceRace = errors.New("installation changed while it was being read")
	// ErrSettingsConflict: two writers allocated the same source settings
	// version.
	ErrSettingsConflict = errors.New("source settings version was allocated concurrently")
	// ErrStateInvalid: an installation state that is forged, expired,
	// already used, or bound to another organization or principal.
	ErrStateInvalid = errors.New("installation state is invalid")
	// ErrInstallationInactive: the installation is suspended or revoked
	// and is never reactivated by the callback.
	ErrInstallationInactive = errors.New("installation is suspended or revoked")
	// ErrInvalid is malformed source settings.
	ErrInvalid = fault.ErrValidation
)

// ErrInstallerUnverified: the person completing the callback could not be
// shown to control the account the installation named in it is on (the
// account itself, or an active admin of the organization). The setup
// URL's installation ID is chosen by whoever sends the browser there, so
// without this check an administrator of one organization could claim
// another account's fresh, not yet bound installation, and a member who
// merely sees an installation could bind it to an organization of theirs.
var ErrInstallerUnverified = errors.New("the installer cannot be shown to control this installation's account")

var (
	// ErrNotHeld: the ingestion is not a held pull request from a fork
	// (already planned, or never held), so there is nothing to plan.
	ErrNotHeld = errors.New("source ingestion is not held")
	// ErrCommitMismatch: the commit a person asked to plan is not the
	// held ingestion's head commit.
	ErrCommitMismatch = errors.New("commit is not the held pull request's head commit")
)

// ErrTagNotFound: the provider has no such tag (any more), or it does not
// name a commit.
var ErrTagNotFound = errors.New("tag not found at the code host")
