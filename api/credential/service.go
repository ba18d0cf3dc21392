package credential

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/workspace"
)

// Options configure the credential service.
type Options struct {
	// HMACKey is IDEMPOTENCY_HMAC_KEY, nil when missing or weak: generic
	// secrets are then refused (503) before anything is sealed.
	HMACKey []byte
	// HandleKey keys the stored digests of handles and callback nonces.
	HandleKey []byte
	// TokenLifetime is how long a workload-identity token lives: the
	// phase timeout (capped at MaxTokenLifetime).
	TokenLifetime time.Duration
	// HandleTTL bounds how long an issued handle waits for its sandbox.
	HandleTTL time.Duration
}

// Service is credential profiles, their versions, run snapshots, handles
// and their redemption.
type Service struct {
	db         *sqlx.DB
	sealer     *seal.Sealer
	workspaces *workspace.Service
	launch     *launch.Service
	issuer     *Issuer
	opts       Options
	now        func() time.Time
}

// NewService returns the credential service. sealer may be nil (no master
// key): generic secrets and signing keys then fail closed.
func NewService(conn *sqlx.DB, sealer *seal.Sealer, workspaces *workspace.Service, admission *launch.Service, issuer *Issuer, opts Options) *Service {
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = time.Hour
	}
	if opts.HandleTTL <= 0 {
		opts.HandleTTL = 15 * time.Minute
	}
	return &Service{db: conn, sealer: sealer, workspaces: workspaces, launch: admission, issuer: issuer, opts: opts, now: time.Now}
}

// Issuer is the workload-identity issuer the service mints with.
func (s *Service) Issuer() *Issuer { return s.issuer }

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Detail is a profile with its current version and the subjects its
// tokens carry.
type Detail struct {
	Profile
	ProjectID string
	Current   *Version
}

// Subjects are the workload-identity subjects of a federation profile's
// workspace, per run phase its versions may serve; nil for a generic
// secret.
func (d Detail) Subjects() map[string]string {
	if !Federated(d.Provider) {
		return nil
	}
	out := map[string]string{}
	for _, phase := range []string{RunPhasePlan, RunPhaseApply, RunPhaseSpeculativePlan} {
		if sub, err := Subject(d.OrganizationID, d.ProjectID, d.WorkspaceID, phase); err == nil {
			out[phase] = sub
		}
	}
	return out
}

// CreateProfileInput is a new profile.
type CreateProfileInput struct {
	Provider string
	Name     string
}

// CreateProfile adds a detached draft profile to a workspace.
func (s *Service) CreateProfile(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in CreateProfileInput) (Detail, error) {
	if err := ValidateProvider(in.Provider); err != nil {
		return Detail{}, err
	}
	name, err := ValidateName(in.Name, in.Provider)
	if err != nil {
		return Detail{}, err
	}
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, workspaceID, access.PermCredentialWrite)
	if err != nil {
		return Detail{}, err
	}
	n, err := countProfiles(ctx, tx, w.ID)
	if err != nil {
		return Detail{}, err
	}
	if n >= MaxProfilesPerWorkspace {
		return Detail{}, ErrTooManyProfiles
	}
	now := s.stamp()
	prof := Profile{ID: id.New("cpr"), OrganizationID: w.OrganizationID, WorkspaceID: w.ID, Provider: in.Provider, Name: name,
		CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: now, UpdatedAt: now}
	if err := insertProfile(ctx, tx, prof); err != nil {
		return Detail{}, err
	}
	return Detail{Profile: prof, ProjectID: w.ProjectID}, audit.Record(ctx, tx, p, "credential_profile.created", "credential_profile", prof.ID,
		map[string]any{"workspace_id": w.ID, "provider": prof.Provider})
}

// visibleProfile loads a profile of the principal's organization inside
// its token boundaries, when it holds perm; anything else is not found.
// For a mutation it locks the workspace, then the profile.
func (s *Service) visibleProfile(ctx context.Context, q sqlx.QueryerContext, p access.Principal, profileID string, perm access.Permission, tx *sqlx.Tx) (Detail, error) {
	if err := p.Require(perm); err != nil {
		return Detail{}, err
	}
	prof, err := profileByID(ctx, q, p.OrganizationID, profileID, false)
	if err != nil {
		return Detail{}, err
	}
	var w workspace.Workspace
	if tx != nil {
		w, err = s.workspaces.WorkspaceForWrite(ctx, tx, p, prof.WorkspaceID, perm)
		if err == nil {
			prof, err = profileByID(ctx, tx, p.OrganizationID, profileID, true)
		}
	} else {
		w, err = s.workspaces.WorkspaceWith(ctx, p, prof.WorkspaceID, perm)
	}
	if errors.Is(err, fault.ErrForbidden) {
		return Detail{}, err
	}
	if err != nil {
		return Detail{}, notFound
	}
	return Detail{Profile: prof, ProjectID: w.ProjectID}, nil
}

// GetProfile reads one profile with its current version.
func (s *Service) GetProfile(ctx context.Context, p access.Principal, profileID string) (Detail, error) {
	d, err := s.visibleProfile(ctx, s.db, p, profileID, access.PermWorkspaceRead, nil)
	if err != nil {
		return Detail{}, err
	}
	cs, err := withCurrentVersions(ctx, s.db, d.OrganizationID, []Profile{d.Profile})
	if err != nil {
		return Detail{}, err
	}
	d.Current = cs[0].Current
	return d, nil
}

// ListProfiles reads a page of a workspace's profiles, newest first.
func (s *Service) ListProfiles(ctx context.Context, p access.Principal, workspaceID string, page cursor.Page) ([]Detail, error) {
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, err
	}
	profiles, err := listProfiles(ctx, s.db, w.OrganizationID, w.ID, page)
	if err != nil {
		return nil, err
	}
	cs, err := withCurrentVersions(ctx, s.db, w.OrganizationID, profiles)
	if err != nil {
		return nil, err
	}
	out := make([]Detail, 0, len(cs))
	for _, c := range cs {
		out = append(out, Detail{Profile: c.Profile, ProjectID: w.ProjectID, Current: c.Current})
	}
	return out, nil
}

// VersionInput is a new version as a client sends it.
type VersionInput struct {
	Audience      string
	Phase         string
	Configuration json.RawMessage
}

// PreparedVersion is a version checked before any transaction: every
// refusal that needs no lock comes before anything is sealed or stored.
type PreparedVersion struct {
	ProfileID   string
	Provider    string
	Audience    string
	Phase       string
	Federation  FederationConfig
	Environment Environment
	// environmentMAC is the keyed digest (IDEMPOTENCY_HMAC_KEY) of a
	// generic map, which stands for it in the request fingerprint.
	environmentMAC []byte
}

// IdempotencyInput is what fingerprints the request: a generic secret's
// map only as its keyed digest, so the fingerprint of a short secret
// cannot be searched for it without IDEMPOTENCY_HMAC_KEY.
func (pv PreparedVersion) IdempotencyInput() any {
	in := map[string]any{"profile_id": pv.ProfileID, "audience": pv.Audience, "phase": pv.Phase}
	if pv.Provider == ProviderGeneric {
		in["environment_hmac"] = hex.EncodeToString(pv.environmentMAC)
	} else {
		in["configuration"] = pv.Federation
	}
	return in
}

// PrepareVersion checks a new version of a visible profile: the phase, the
// idempotency key a generic secret needs (503 without it), then the
// configuration (a NUL value, a reserved name, an oversize map are 400s
// here, before sealing).
func (s *Service) PrepareVersion(ctx context.Context, p access.Principal, profileID string, in VersionInput) (PreparedVersion, error) {
	d, err := s.visibleProfile(ctx, s.db, p, profileID, access.PermCredentialWrite, nil)
	if err != nil {
		return PreparedVersion{}, err
	}
	if err := ValidatePhase(d.Provider, in.Phase); err != nil {
		return PreparedVersion{}, err
	}
	pv := PreparedVersion{ProfileID: d.ID, Provider: d.Provider, Phase: in.Phase}
	if d.Provider == ProviderGeneric {
		if len(s.opts.HMACKey) == 0 {
			return PreparedVersion{}, ErrHMACKeyUnavailable
		}
		if pv.Environment, err = ParseEnvironment(in.Configuration); err != nil {
			return PreparedVersion{}, err
		}
		m := hmac.New(sha256.New, s.opts.HMACKey)
		m.Write([]byte("cairn/generic-secret-request/v1\n" + d.ID + "\n"))
		m.Write(pv.Environment.Canonical)
		pv.environmentMAC = m.Sum(nil)
	} else if pv.Federation, err = ParseFederation(d.Provider, in.Configuration); err != nil {
		return PreparedVersion{}, err
	}
	if pv.Audience, err = ValidateAudience(d.Provider, in.Audience, pv.Federation); err != nil {
		return PreparedVersion{}, err
	}
	return pv, nil
}

// CreateVersion writes the next numbered version of a prepared profile,
// sealing a generic map bound to the version's identity.
func (s *Service) CreateVersion(ctx context.Context, tx *sqlx.Tx, p access.Principal, pv PreparedVersion) (Version, error) {
	d, err := s.visibleProfile(ctx, tx, p, pv.ProfileID, access.PermCredentialWrite, tx)
	if err != nil {
		return Version{}, err
	}
	if err := CanCreateVersion(d.Profile); err != nil {
		return Version{}, err
	}
	if d.Provider != pv.Provider {
		return Version{}, notFound
	}
	d.VersionCount++
	v := Version{ID: id.New("cpv"), OrganizationID: d.OrganizationID, ProfileID: d.ID, Number: d.VersionCount,
		Provider: d.Provider, Audience: pv.Audience, Phase: pv.Phase, CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: s.stamp()}
	evidence := map[string]any{"workspace_id": d.WorkspaceID, "profile_id": d.ID, "version": v.Number, "provider": v.Provider,
		"phase": v.Phase, "audience": v.Audience}
	if d.Provider == ProviderGeneric {
		v.EnvironmentNames = pq.StringArray(pv.Environment.Names)
		if v.Sealed, err = s.seal(pv.Environment.Canonical, v); err != nil {
			return Version{}, err
		}
		evidence["environment_names"] = pv.Environment.Names
	} else {
		v.Configuration = &FederationJSON{pv.Federation}
	}
	if err := insertVersion(ctx, tx, v); err != nil {
		return Version{}, err
	}
	d.UpdatedAt = v.CreatedAt
	if err := saveProfile(ctx, tx, d.Profile); err != nil {
		return Version{}, err
	}
	return v, audit.Record(ctx, tx, p, "credential_profile_version.created", "credential_profile_version", v.ID, evidence)
}

// envelopeAssociation binds a sealed map to its version: a ciphertext
// copied onto another version, profile or tenant does not open.
func envelopeAssociation(v Version) []byte {
	return fmt.Appendf(nil, "cairn/credential-version/%s/%s/%s/%d", v.OrganizationID, v.ProfileID, v.ID, v.Number)
}

func (s *Service) seal(plain []byte, v Version) ([]byte, error) {
	sealed, err := s.sealer.Seal(plain, envelopeAssociation(v))
	if errors.Is(err, seal.ErrNoKey) {
		return nil, fmt.Errorf("sealing a generic secret without CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
	}
	return sealed, err
}

// openEnvironment unseals a generic version's map and checks it against
// the names the version records.
func (s *Service) openEnvironment(v Version) (map[string]string, error) {
	plain, err := s.sealer.Open(v.Sealed, envelopeAssociation(v))
	if errors.Is(err, seal.ErrNoKey) {
		return nil, fmt.Errorf("opening a generic secret without CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
	}
	if err != nil {
		return nil, fmt.Errorf("opening version %s: %w", v.ID, err)
	}
	env, err := ParseEnvironment(fmt.Appendf(nil, `{"environment":%s}`, plain))
	if err != nil || !slices.Equal(env.Names, v.EnvironmentNames) {
		return nil, fmt.Errorf("version %s: the sealed map does not match its names", v.ID)
	}
	var out map[string]string
	if err := json.Unmarshal(plain, &out); err != nil {
		return nil, fmt.Errorf("version %s: %w", v.ID, err)
	}
	return out, nil
}

// GetVersion reads one version of a visible profile; a version of another
// profile is not found.
func (s *Service) GetVersion(ctx context.Context, p access.Principal, profileID, versionID string) (Version, error) {
	d, err := s.visibleProfile(ctx, s.db, p, profileID, access.PermWorkspaceRead, nil)
	if err != nil {
		return Version{}, err
	}
	return versionByID(ctx, s.db, d.OrganizationID, d.ID, versionID, false)
}

// ListVersions reads a page of a profile's versions, newest first.
func (s *Service) ListVersions(ctx context.Context, p access.Principal, profileID string, page cursor.Page) ([]Version, error) {
	d, err := s.visibleProfile(ctx, s.db, p, profileID, access.PermWorkspaceRead, nil)
	if err != nil {
		return nil, err
	}
	return listVersions(ctx, s.db, d.OrganizationID, d.ID, page)
}

// Verify has the broker open and validate a version's stored envelope (a
// generic map) or configuration (a federation, which also needs a signing
// key), then makes it the profile's current version: runs created from
// now on pin it.
func (s *Service) Verify(ctx context.Context, tx *sqlx.Tx, p access.Principal, profileID, versionID string) (Detail, Version, error) {
	d, err := s.visibleProfile(ctx, tx, p, profileID, access.PermCredentialWrite, tx)
	if err != nil {
		return Detail{}, Version{}, err
	}
	v, err := versionByID(ctx, tx, d.OrganizationID, d.ID, versionID, true)
	if err != nil {
		return Detail{}, Version{}, err
	}
	if err := CanVerify(d.Profile, v); err != nil {
		return Detail{}, Version{}, err
	}
	if v.Provider == ProviderGeneric {
		if _, err := s.openEnvironment(v); err != nil {
			return Detail{}, Version{}, err
		}
	} else {
		if v.Configuration == nil {
			return Detail{}, Version{}, fmt.Errorf("version %s has no configuration", v.ID)
		}
		raw, _ := json.Marshal(v.Configuration.FederationConfig)
		if _, err := ParseFederation(v.Provider, raw); err != nil {
			return Detail{}, Version{}, err
		}
		if err := s.issuer.keys.Ready(ctx); err != nil {
			if errors.Is(err, ErrNoSigningKey) {
				return Detail{}, Version{}, fmt.Errorf("verifying a federation without a signing key: %w", fault.ErrUnavailable)
			}
			return Detail{}, Version{}, err
		}
	}
	previous := d.CurrentVersionID
	d.Profile, v = Verified(d.Profile, v, s.stamp())
	if err := markVersion(ctx, tx, v); err != nil {
		return Detail{}, Version{}, err
	}
	if err := saveProfile(ctx, tx, d.Profile); err != nil {
		return Detail{}, Version{}, err
	}
	d.Current = &v
	evidence := map[string]any{"workspace_id": d.WorkspaceID, "profile_id": d.ID, "version": v.Number, "provider": v.Provider}
	if previous != nil && *previous != v.ID {
		evidence["replaced_version_id"] = *previous
	}
	return d, v, audit.Record(ctx, tx, p, "credential_profile_version.verified", "credential_profile_version", v.ID, evidence)
}

// Archive detaches a profile for good: runs created from now on leave it
// out, and runs already queued with its versions cannot redeem them.
func (s *Service) Archive(ctx context.Context, tx *sqlx.Tx, p access.Principal, profileID string) (Detail, error) {
	d, err := s.visibleProfile(ctx, tx, p, profileID, access.PermCredentialWrite, tx)
	if err != nil {
		return Detail{}, err
	}
	previous := d.CurrentVersionID
	if d.Profile, err = Archived(d.Profile, s.stamp()); err != nil {
		return Detail{}, err
	}
	if err := saveProfile(ctx, tx, d.Profile); err != nil {
		return Detail{}, err
	}
	evidence := map[string]any{"workspace_id": d.WorkspaceID, "provider": d.Provider}
	if previous != nil {
		evidence["current_version_id"] = *previous
	}
	return d, audit.Record(ctx, tx, p, "credential_profile.archived", "credential_profile", d.ID, evidence)
}

// Revoke disables a version, current or historical: it is never issued
// again, and a run that pinned it ends plan_credentials_required.
func (s *Service) Revoke(ctx context.Context, tx *sqlx.Tx, p access.Principal, profileID, versionID string) (Detail, Version, error) {
	d, err := s.visibleProfile(ctx, tx, p, profileID, access.PermCredentialWrite, tx)
	if err != nil {
		return Detail{}, Version{}, err
	}
	v, err := versionByID(ctx, tx, d.OrganizationID, d.ID, versionID, true)
	if err != nil {
		return Detail{}, Version{}, err
	}
	wasCurrent := d.CurrentVersionID != nil && *d.CurrentVersionID == v.ID
	if d.Profile, v, err = Revoked(d.Profile, v, s.stamp()); err != nil {
		return Detail{}, Version{}, err
	}
	if err := markVersion(ctx, tx, v); err != nil {
		return Detail{}, Version{}, err
	}
	if err := saveProfile(ctx, tx, d.Profile); err != nil {
		return Detail{}, Version{}, err
	}
	if wasCurrent {
		d.Current = nil
	}
	return d, v, audit.Record(ctx, tx, p, "credential_profile_version.revoked", "credential_profile_version", v.ID,
		map[string]any{"workspace_id": d.WorkspaceID, "profile_id": d.ID, "version": v.Number, "provider": v.Provider, "was_current": wasCurrent})
}

// SnapshotRun decides, in the transaction that creates a run, which
// versions it pins; a non-empty reason means its plan will end
// plan_credentials_required.
func (s *Service) SnapshotRun(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID string, speculative bool) ([]Ref, string, error) {
	cs, err := candidates(ctx, tx, organizationID, workspaceID)
	if err != nil {
		return nil, "", err
	}
	refs, reason := Select(cs, speculative)
	return refs, reason, nil
}

// AttemptFacts identify the phase attempt credentials are issued for.
type AttemptFacts struct {
	OrganizationID string
	WorkspaceID    string
	RunID          string
	AttemptID      string
	// RunPhase is plan, apply or speculative_plan (a speculative run's
	// plan): each has its own subject.
	RunPhase string
}

// Issue runs in the transaction that starts an attempt (the sandbox-create
// intent): it rechecks every pinned version (an archive or revoke since the
// run was created blocks it, as does a federation provider switched off)
// and issues the attempt's one-time handle. It returns nil without refs,
// and an UnavailableError when a credential can no longer be issued.
func (s *Service) Issue(ctx context.Context, tx *sqlx.Tx, f AttemptFacts, refs []Ref) (*Grant, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if _, err := s.recheck(ctx, tx, f.OrganizationID, f.WorkspaceID, f.RunPhase, refs); err != nil {
		return nil, err
	}
	g := Grant{HandleID: id.New("chd"), Handle: randomToken(), Nonce: randomToken(),
		Manifest: Manifest{AttemptID: f.AttemptID, RunID: f.RunID, RunPhase: f.RunPhase, Credentials: refs}}
	h := handleRow{ID: g.HandleID, OrganizationID: f.OrganizationID, RunID: f.RunID, AttemptID: f.AttemptID, Phase: f.RunPhase,
		ManifestDigest: g.Manifest.Digest(), NonceDigest: s.keyed("nonce", g.Nonce)}
	if err := insertHandle(ctx, tx, h, s.keyed("handle", g.Handle), s.opts.HandleTTL); err != nil {
		return nil, err
	}
	return &g, nil
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Service) keyed(purpose, value string) []byte {
	m := hmac.New(sha256.New, s.opts.HandleKey)
	m.Write([]byte("cairn/credential-" + purpose + "\n" + value))
	return m.Sum(nil)
}

// recheck loads the pinned versions and refuses any that may no longer be
// handed out: revoked, archived, unverified, not serving the run phase, or
// a federation launch control does not admit for the workspace.
func (s *Service) recheck(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID, runPhase string, refs []Ref) (map[string]pinnedRow, error) {
	rows, err := pinnedVersions(ctx, q, organizationID, refs)
	if err != nil {
		return nil, err
	}
	for _, ref := range refs {
		v, ok := rows[ref.VersionID]
		switch {
		case !ok || v.DisabledAt != nil:
			return nil, UnavailableError{Reason: ReasonVersionDisabled}
		case v.ArchivedAt != nil:
			return nil, UnavailableError{Reason: ReasonProfileArchived}
		case v.VerifiedAt == nil || v.ProfileID != ref.ProfileID || v.Provider != ref.Provider:
			return nil, UnavailableError{Reason: ReasonVersionUnavailable}
		case !v.Permits(runPhase):
			return nil, UnavailableError{Reason: ReasonPhaseNotPermitted}
		}
		if Federated(v.Provider) {
			d := s.launch.DecideBy(ctx, q, launch.Subject{OrganizationID: organizationID, WorkspaceID: workspaceID}, launch.AdmitFederation(v.Provider))
			if !d.Admitted {
				return nil, UnavailableError{Reason: ReasonProviderDisabled}
			}
		}
	}
	return rows, nil
}

// Redeem is the worker's one-time redemption of a grant inside sandbox
// start, an exact-bound capability checked in one transaction: the handle
// (by its keyed digest) must be unexpired and unredeemed, issued for this
// attempt and this manifest, and presented with its callback nonce; the
// attempt must still run; every pinned version is rechecked as at
// issuance. The handle is then consumed. Only after that commits are
// generic maps unsealed and tokens minted, laid out for a sandbox whose
// private directory commands see at dir.
func (s *Service) Redeem(ctx context.Context, g Grant, dir string) (Materials, error) {
	var facts runFacts
	var rows map[string]pinnedRow
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		h, err := handleForRedemption(ctx, tx, s.keyed("handle", g.Handle))
		if err != nil {
			return err
		}
		switch {
		case h.RedeemedAt != nil || !h.Live || h.ID != g.HandleID || h.AttemptID != g.Manifest.AttemptID:
			return ErrHandleInvalid
		case !hmac.Equal(h.ManifestDigest, g.Manifest.Digest()) || !hmac.Equal(h.NonceDigest, s.keyed("nonce", g.Nonce)):
			return ErrHandleInvalid
		}
		if facts, err = attemptFacts(ctx, tx, h.AttemptID); err != nil {
			return err
		}
		if facts.AttemptStatus != "running" || facts.RunID != h.RunID || facts.OrganizationID != h.OrganizationID || facts.Untrusted {
			return ErrHandleInvalid
		}
		if rows, err = s.recheck(ctx, tx, facts.OrganizationID, facts.WorkspaceID, g.Manifest.RunPhase, g.Manifest.Credentials); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE credential_handles SET redeemed_at = now() WHERE id = $1`, h.ID); err != nil {
			return fmt.Errorf("consuming credential handle: %w", err)
		}
		versions := make([]string, 0, len(g.Manifest.Credentials))
		for _, r := range g.Manifest.Credentials {
			versions = append(versions, r.VersionID)
		}
		_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: facts.OrganizationID, Action: "credential_handle.redeemed",
			Actor: audit.Actor{Type: audit.ActorSystem, ID: "runner"}, TargetType: "run", TargetID: facts.RunID,
			Evidence: map[string]any{"attempt_id": h.AttemptID, "run_phase": g.Manifest.RunPhase, "version_ids": versions}})
		return err
	})
	if errors.Is(err, ErrHandleInvalid) {
		return Materials{}, UnavailableError{Reason: ReasonHandleRefused}
	}
	if err != nil {
		return Materials{}, err
	}
	return s.materialize(ctx, g, facts, rows, dir)
}

// materialize unseals the generic maps and mints one token per federation
// version, laid out for the sandbox.
func (s *Service) materialize(ctx context.Context, g Grant, f runFacts, rows map[string]pinnedRow, dir string) (Materials, error) {
	var m Materials
	for _, ref := range g.Manifest.Credentials {
		v := rows[ref.VersionID].Version
		if v.Provider == ProviderGeneric {
			env, err := s.openEnvironment(v)
			if err != nil {
				return Materials{}, UnavailableError{Reason: ReasonIssuerUnavailable}
			}
			values := make([]string, 0, len(env))
			for _, name := range slices.Sorted(maps.Keys(env)) {
				values = append(values, env[name])
			}
			m.merge(env, nil, values...)
			continue
		}
		sub, err := Subject(f.OrganizationID, f.ProjectID, f.WorkspaceID, g.Manifest.RunPhase)
		if err != nil {
			return Materials{}, err
		}
		token, err := s.issuer.Mint(ctx, Claims{Subject: sub, Audience: v.Audience, OrganizationID: f.OrganizationID,
			OrganizationName: f.OrganizationName, ProjectID: f.ProjectID, ProjectName: f.ProjectName, WorkspaceID: f.WorkspaceID,
			WorkspaceName: f.WorkspaceName, RunID: f.RunID, RunPhase: g.Manifest.RunPhase, RunInitiator: f.RunInitiator},
			s.opts.TokenLifetime)
		if errors.Is(err, ErrNoSigningKey) || errors.Is(err, seal.ErrNoKey) {
			return Materials{}, UnavailableError{Reason: ReasonIssuerUnavailable}
		}
		if err != nil {
			return Materials{}, err
		}
		var cfg FederationConfig
		if v.Configuration != nil {
			cfg = v.Configuration.FederationConfig
		}
		env, files := federationMaterials(v.Provider, cfg, token, dir, "cairn-"+f.RunID)
		m.merge(env, files, token)
	}
	return m, nil
}

// SpeculativeVersion checks that versionID is a verified, enabled
// speculative_plan federation version of a profile of the workspace: the
// only kind a code-host source may name for same-repository pull requests.
// Anything else, including another workspace's version, is not found.
func SpeculativeVersion(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID, versionID string) (Version, error) {
	var profileID string
	err := sqlx.GetContext(ctx, q, &profileID, `SELECT v.profile_id FROM credential_profile_versions v
		JOIN credential_profiles p ON p.id = v.profile_id
		WHERE v.id = $1 AND v.organization_id = $2 AND p.workspace_id = $3 AND p.archived_at IS NULL`,
		versionID, organizationID, workspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, notFound
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading credential profile version: %w", err)
	}
	v, err := versionByID(ctx, q, organizationID, profileID, versionID, false)
	if err != nil {
		return Version{}, err
	}
	if !v.Usable() || !v.Permits(RunPhaseSpeculativePlan) {
		return Version{}, notFound
	}
	return v, nil
}

// SnapshotSpeculativeVersion is what a code-host speculative run pins: the
// source's explicit speculative_plan version and nothing else, or nothing
// at all (forks, and sources naming none). A named version that stopped
// being usable fails the snapshot instead of being dropped silently.
func SnapshotSpeculativeVersion(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID, versionID string) ([]Ref, string, error) {
	if versionID == "" {
		return nil, "", nil
	}
	v, err := SpeculativeVersion(ctx, tx, organizationID, workspaceID, versionID)
	if errors.Is(err, notFound) {
		return nil, ReasonVersionUnavailable, nil
	}
	if err != nil {
		return nil, "", err
	}
	return []Ref{refOf(v)}, "", nil
}
