package credential

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// Why a run's credentials are unavailable. Each is the run's terminal
// reason when its plan ends plan_credentials_required; all start with
// "credential_".
const (
	// ReasonVersionUnavailable: a profile runs need has no usable current
	// version (its current one was revoked).
	ReasonVersionUnavailable = "credential_version_unavailable"
	// ReasonPhaseNotPermitted: a speculative run in a workspace whose
	// credentials serve plan_and_apply only.
	ReasonPhaseNotPermitted = "credential_phase_not_permitted"
	// ReasonEnvironmentConflict: two pinned versions would set the same
	// environment variable.
	ReasonEnvironmentConflict = "credential_environment_conflict"
	// ReasonVersionDisabled: a pinned version was revoked after the run
	// was created.
	ReasonVersionDisabled = "credential_version_disabled"
	// ReasonProfileArchived: a pinned version's profile was archived.
	ReasonProfileArchived = "credential_profile_archived"
	// ReasonProviderDisabled: launch control does not admit handing this
	// federation provider's credentials to the workspace's sandboxes.
	ReasonProviderDisabled = "credential_provider_disabled"
	// ReasonHandleRefused: the handle did not redeem (expired, already
	// redeemed, or presented for another attempt, manifest or nonce).
	ReasonHandleRefused = "credential_handle_refused"
	// ReasonIssuerUnavailable: the issuer cannot unseal or sign (no
	// master key).
	ReasonIssuerUnavailable = "credential_issuer_unavailable"
	// ReasonWithheld: the run's configuration is untrusted (an agent's
	// unreleased run, a fork's pull request) and gets no credentials.
	ReasonWithheld = "credential_withheld_untrusted"
)

// UnavailableError means a run's pinned credentials cannot be issued or
// redeemed now (a version was revoked, a profile archived, a provider
// switched off), for Reason; callers read it with ReasonOf. A plan then
// ends plan_credentials_required.
type UnavailableError struct{ Reason string }

func (e UnavailableError) Error() string { return "credentials unavailable: " + e.Reason }

// ReasonOf returns the reason of an unavailability, or "".
func ReasonOf(err error) string {
	var ue UnavailableError
	if errors.As(err, &ue) {
		return ue.Reason
	}
	return ""
}

// IsReason reports whether a run's terminal reason or an attempt's
// classification says its credentials were unavailable.
func IsReason(code string) bool { return strings.HasPrefix(code, "credential_") }

// Ref is a version as a run's input snapshot pins it: identities and the
// names it sets, never a value.
type Ref struct {
	ProfileID        string   `json:"profile_id"`
	VersionID        string   `json:"version_id"`
	Number           int      `json:"number"`
	Provider         string   `json:"provider"`
	Phase            string   `json:"phase"`
	EnvironmentNames []string `json:"environment_names"`
}

// Candidate is a profile with its current version (nil when it has
// none).
type Candidate struct {
	Profile Profile
	Current *Version
}

// Select decides what a new run pins (SPEC §3): the current version of
// every active profile that serves the run, in profile order. A detached
// draft is left out. An active profile whose current version is missing,
// unverified or revoked fails the snapshot, as does a speculative run in
// a workspace that needs plan_and_apply credentials it may not have (a
// speculative snapshot holds no generic secret, and only speculative_plan
// federation versions): unless a pinned speculative_plan version covers
// the same provider. Two pinned versions that would set the same
// environment variable fail it too. The failure is a reason code; the run
// is created and its plan ends plan_credentials_required.
func Select(candidates []Candidate, speculative bool) ([]Ref, string) {
	var refs []Ref
	var needed []string // providers a speculative run lacks
	for _, c := range candidates {
		switch {
		case c.Profile.ArchivedAt != nil || c.Profile.ActivatedAt == nil:
			continue
		case c.Current == nil || !c.Current.Usable():
			return nil, ReasonVersionUnavailable
		}
		v := *c.Current
		runPhase := RunPhasePlan
		if speculative {
			runPhase = RunPhaseSpeculativePlan
		}
		switch {
		case v.Permits(runPhase):
			refs = append(refs, refOf(v))
		case speculative && v.Phase == PhasePlanAndApply:
			needed = append(needed, v.Provider)
		}
		// A speculative_plan version does not serve tracked or manual
		// runs: it exists beside a plan_and_apply profile, not instead.
	}
	for _, provider := range needed {
		if !slices.ContainsFunc(refs, func(r Ref) bool { return r.Provider == provider }) {
			return nil, ReasonPhaseNotPermitted
		}
	}
	seen := map[string]bool{}
	for _, r := range refs {
		for _, name := range r.EnvironmentNames {
			if seen[name] {
				return nil, ReasonEnvironmentConflict
			}
			seen[name] = true
		}
	}
	return refs, ""
}

func refOf(v Version) Ref {
	return Ref{ProfileID: v.ProfileID, VersionID: v.ID, Number: v.Number, Provider: v.Provider, Phase: v.Phase,
		EnvironmentNames: VersionEnvironmentNames(v)}
}

// Manifest is what one attempt's handle is issued for: the attempt, the
// run phase and the pinned versions. Its digest binds the handle, so a
// handle never redeems for another attempt's credentials.
type Manifest struct {
	AttemptID   string `json:"attempt_id"`
	RunID       string `json:"run_id"`
	RunPhase    string `json:"run_phase"`
	Credentials []Ref  `json:"credentials"`
}

// Digest is the SHA-256 of the manifest's canonical JSON.
func (m Manifest) Digest() []byte {
	body, err := json.Marshal(m)
	if err != nil {
		// Only strings and ints: cannot fail.
		panic(err)
	}
	sum := sha256.Sum256(append([]byte("cairn/credential-manifest/v1\n"), body...))
	return sum[:]
}

// Grant is an issued handle as the worker holds it, in memory only: the
// handle, the callback nonce and the manifest it was issued for. The
// database keeps keyed digests of the first two and the manifest's digest.
type Grant struct {
	HandleID string
	Handle   string
	Nonce    string
	Manifest Manifest
}
