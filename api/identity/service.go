package identity

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/authcache"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/team"
)

// Options configure the identity service.
type Options struct {
	Password PasswordParams
	// HashBudgetKiB is the memory all password hashes running at once may
	// use together; HashWait is how long a hash waits for its share before
	// the request is refused with ErrBusy.
	HashBudgetKiB int64
	HashWait      time.Duration
	SessionTTL    time.Duration
	// TokenKey keys the stored hash of session tokens, SubjectKey the
	// throttle subjects, InvitationKey the stored hash of invitation
	// tokens. All derive from AUTH_SECRET.
	TokenKey      []byte
	SubjectKey    []byte
	InvitationKey []byte
	// Now is the clock (nil: time.Now); tests move it instead of sleeping.
	Now func() time.Time
}

// Service is sign-up, sign-in, sessions, organizations and memberships.
type Service struct {
	db     *sqlx.DB
	opts   Options
	now    func() time.Time
	hashes *hashGate
	// decoy stands in for the password hash of an e-mail without an
	// account, so a sign-in for it costs the same argon2id verification.
	decoy string
	// principals keeps what sessions and user tokens resolved to (nil:
	// every request reads its credential).
	principals *authcache.Cache
}

// CachePrincipals serves sessions and user tokens presented again from c
// (cairn-api's, whose listener forgets them on any change).
func (s *Service) CachePrincipals(c *authcache.Cache) { s.principals = c }

// NewService returns the identity service.
func NewService(conn *sqlx.DB, opts Options) (*Service, error) {
	if opts.Password.MemoryKiB == 0 || opts.Password.Iterations == 0 || opts.Password.Parallelism == 0 {
		return nil, errors.New("identity: argon2id parameters must be positive")
	}
	if opts.HashBudgetKiB < int64(opts.Password.MemoryKiB) {
		return nil, errors.New("identity: the password hashing budget must hold at least one hash")
	}
	decoy, err := decoyHash(opts.Password)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Service{db: conn, opts: opts, now: now, hashes: newHashGate(opts.HashBudgetKiB, opts.HashWait), decoy: decoy}, nil
}

// SignedIn is the outcome of sign-up or sign-in: the session and the token,
// which exists only here and in the client's cookie.
type SignedIn struct {
	User    User
	Session Session
	Token   string
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating session token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (s *Service) tokenHash(token string) []byte {
	m := hmac.New(sha256.New, s.opts.TokenKey)
	m.Write([]byte(token))
	return m.Sum(nil)
}

func (s *Service) startSession(ctx context.Context, q sqlx.ExtContext, userID string, activeOrg *string) (Session, string, error) {
	token, err := newToken()
	if err != nil {
		return Session{}, "", err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	sess := Session{
		ID:                   id.New("ses"),
		UserID:               userID,
		ActiveOrganizationID: activeOrg,
		CreatedAt:            now,
		ExpiresAt:            now.Add(s.opts.SessionTTL),
		ReauthenticatedAt:    now,
	}
	if err := insertSession(ctx, q, sess, s.tokenHash(token)); err != nil {
		return Session{}, "", err
	}
	return sess, token, nil
}

// SignUp creates an account and signs it in. Sign-ups are throttled per
// client address, since each one costs a password hash.
func (s *Service) SignUp(ctx context.Context, email, password, name string, client netip.Addr) (SignedIn, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return SignedIn{}, err
	}
	if err := ValidatePassword(password); err != nil {
		return SignedIn{}, err
	}
	if name, err = ValidateName(name); err != nil {
		return SignedIn{}, err
	}
	check := s.subject(signUpPolicy, addressKey(client))
	if err := s.admit(ctx, check); err != nil {
		return SignedIn{}, err
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		// Only a sign-up that got to hash counts toward the limit.
		return SignedIn{}, errors.Join(err, s.refund(ctx, check))
	}
	u := User{ID: id.New("usr"), Email: email, Name: name, CreatedAt: s.now().UTC().Truncate(time.Microsecond)}
	var out SignedIn
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := insertUser(ctx, tx, u, hash); err != nil {
			return err
		}
		sess, token, err := s.startSession(ctx, tx, u.ID, nil)
		out = SignedIn{User: u, Session: sess, Token: token}
		return err
	})
	return out, err
}

// SignIn checks an e-mail and password. Every failure looks the same from
// outside (ErrInvalidCredentials), whether the e-mail has an account or
// not, and takes as long. Failures slow down the (e-mail, client address)
// pair and, after many, the address (RateLimitedError); an account is
// never locked, so a correct password from another address still signs in.
func (s *Service) SignIn(ctx context.Context, email, password string, client netip.Addr) (SignedIn, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return SignedIn{}, ErrInvalidCredentials
	}
	u, err := s.checkPassword(ctx, email, password, client)
	if err != nil {
		return SignedIn{}, err
	}
	// Checked after the password, so the answer tells only the account's
	// holder that their organization requires SSO.
	if required, err := SSORequiredFor(ctx, s.db, u.ID); err != nil || required {
		return SignedIn{}, cmp.Or(err, ErrSSORequired)
	}
	// Resume in the organization the user belongs to when there is exactly
	// one, which is what a person with one organization expects.
	orgs, err := organizationsOfUser(ctx, s.db, u.ID)
	if err != nil {
		return SignedIn{}, err
	}
	var active *string
	if len(orgs) == 1 {
		active = &orgs[0].ID
	}
	sess, token, err := s.startSession(ctx, s.db, u.ID, active)
	if err != nil {
		return SignedIn{}, err
	}
	return SignedIn{User: u.User, Session: sess, Token: token}, nil
}

// checkPassword is the throttled password check of sign-in and step-up.
// The attempt is counted before the password is verified and stays
// counted when it fails; a success clears its pair and gives the address
// its attempt back; an attempt that never got verified (busy, canceled, a
// database error) is given back too.
func (s *Service) checkPassword(ctx context.Context, email, password string, client netip.Addr) (userWithHash, error) {
	checks := s.signInChecks(email, client)
	if err := s.admit(ctx, checks...); err != nil {
		return userWithHash{}, err
	}
	u, err := userForSignIn(ctx, s.db, email)
	hash := u.PasswordHash
	// An account without a password (created by an identity provider)
	// costs the same verification as a missing one, and fails like it.
	passwordless := err == nil && hash == ""
	if errors.Is(err, fault.ErrNotFound) || passwordless {
		hash = s.decoy
	} else if err != nil {
		return userWithHash{}, errors.Join(err, s.refund(ctx, checks...))
	}
	ok, err := s.verifyPassword(ctx, password, hash)
	if errors.Is(err, ErrBusy) || ctx.Err() != nil {
		return userWithHash{}, errors.Join(err, ctx.Err(), s.refund(ctx, checks...))
	}
	if err != nil || !ok || u.ID == "" || passwordless {
		return userWithHash{}, ErrInvalidCredentials
	}
	pair, address := checks[0], checks[1]
	if err := errors.Join(s.forget(ctx, pair), s.refund(ctx, address)); err != nil {
		return userWithHash{}, err
	}
	return u, nil
}

// SessionView is what get-session returns.
type SessionView struct {
	User    User
	Session Session
	Role    *access.Role
}

func (s *Service) session(ctx context.Context, token string) (liveSession, error) {
	if token == "" {
		return liveSession{}, fault.ErrUnauthenticated
	}
	return sessionByTokenHash(ctx, s.db, s.tokenHash(token))
}

// GetSession returns the signed-in user and session of a token.
func (s *Service) GetSession(ctx context.Context, token string) (SessionView, error) {
	ls, err := s.session(ctx, token)
	if err != nil {
		return SessionView{}, err
	}
	view := SessionView{
		User:    User{ID: ls.UserID, Email: ls.UserEmail, Name: ls.UserName},
		Session: ls.Session,
	}
	if ls.Role != nil {
		r := access.Role(*ls.Role)
		view.Role = &r
	}
	return view, nil
}

// AuthenticateSession resolves a session token to a principal in its active
// organization. No session is ErrUnauthenticated; no active organization or
// a membership that no longer exists is ErrForbidden.
func (s *Service) AuthenticateSession(ctx context.Context, token string) (access.Principal, error) {
	if token == "" {
		return access.Principal{}, fault.ErrUnauthenticated
	}
	// Every authenticated /v1 request comes here: a session presented
	// again is served from memory, and otherwise the session and its team
	// grants are one query, not two.
	hash := s.tokenHash(token)
	key := "session\x00" + string(hash)
	if p, ok := s.principals.Lookup(key); ok {
		return p, nil
	}
	ticket := s.principals.Ticket()
	ls, rawGrants, err := sessionWithGrants(ctx, s.db, hash)
	if err != nil {
		return access.Principal{}, err
	}
	if ls.ActiveOrganizationID == nil {
		return access.Principal{}, ErrNoActiveOrganization
	}
	if ls.Role == nil {
		return access.Principal{}, fmt.Errorf("membership ended: %w", fault.ErrForbidden)
	}
	role := access.Role(*ls.Role)
	grants, err := team.DecodeGrants(rawGrants)
	if err != nil {
		return access.Principal{}, err
	}
	p := access.Principal{
		Kind:              access.KindUser,
		ID:                ls.UserID,
		Name:              ls.UserName,
		SessionID:         ls.ID,
		OrganizationID:    *ls.ActiveOrganizationID,
		Role:              role,
		Permissions:       access.PermissionsOf(role),
		Grants:            grants,
		ReauthenticatedAt: ls.ReauthenticatedAt,
	}
	s.principals.Keep(ticket, key, p, ls.ExpiresAt)
	return p, nil
}

// SignOut revokes the session of a token at once.
func (s *Service) SignOut(ctx context.Context, token string) error {
	ls, err := s.session(ctx, token)
	if err != nil {
		return err
	}
	return revokeSession(ctx, s.db, ls.ID)
}

// Reauthenticate checks the password again and records the step-up time on
// the session. It is throttled like a sign-in for the session's e-mail.
func (s *Service) Reauthenticate(ctx context.Context, token, password string, client netip.Addr) (Session, error) {
	ls, err := s.session(ctx, token)
	if err != nil {
		return Session{}, err
	}
	u, err := userByID(ctx, s.db, ls.UserID)
	if err != nil {
		return Session{}, err
	}
	if _, err := s.checkPassword(ctx, u.Email, password, client); err != nil {
		return Session{}, err
	}
	at := s.now().UTC().Truncate(time.Microsecond)
	if err := markReauthenticated(ctx, s.db, ls.ID, at); err != nil {
		return Session{}, err
	}
	ls.ReauthenticatedAt = at
	return ls.Session, nil
}

// CreateOrganization creates a tenant owned by the session's user and makes
// it the session's active organization.
func (s *Service) CreateOrganization(ctx context.Context, token, name, slug string) (Organization, error) {
	ls, err := s.session(ctx, token)
	if err != nil {
		return Organization{}, err
	}
	if name, err = ValidateName(name); err != nil {
		return Organization{}, err
	}
	if err := ValidateSlug(slug); err != nil {
		return Organization{}, err
	}
	org := Organization{ID: id.New("org"), Name: name, Slug: slug, CreatedAt: s.now().UTC().Truncate(time.Microsecond),
		DefaultExecutionMode: ExecutionRemote}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := createOrganization(ctx, tx, org, ls.UserID); err != nil {
			return err
		}
		return setActiveOrganization(ctx, tx, ls.ID, org.ID)
	})
	return org, err
}

func createOrganization(ctx context.Context, tx *sqlx.Tx, org Organization, ownerID string) error {
	if err := insertOrganization(ctx, tx, org, ownerID); err != nil {
		return err
	}
	if err := insertMembership(ctx, tx, org.ID, ownerID, access.RoleOwner, "", JoinedByPassword); err != nil {
		return err
	}
	if _, err := team.CreateOwnersTeam(ctx, tx, org.ID, ownerID, org.CreatedAt); err != nil {
		return err
	}
	_, err := audit.Append(ctx, tx, audit.Entry{
		OrganizationID: org.ID,
		Action:         "organization.created",
		Actor:          audit.Actor{Type: audit.ActorUser, ID: ownerID},
		TargetType:     "organization",
		TargetID:       org.ID,
		Evidence:       map[string]any{"slug": org.Slug},
	})
	return err
}

// SetActiveOrganization switches the session to an organization the user
// is a member of. Any other organization, existing or not, is not found.
func (s *Service) SetActiveOrganization(ctx context.Context, token, organizationID string) (OrganizationMembership, error) {
	ls, err := s.session(ctx, token)
	if err != nil {
		return OrganizationMembership{}, err
	}
	orgs, err := organizationsOfUser(ctx, s.db, ls.UserID)
	if err != nil {
		return OrganizationMembership{}, err
	}
	for _, o := range orgs {
		if o.ID == organizationID {
			return o, setActiveOrganization(ctx, s.db, ls.ID, o.ID)
		}
	}
	return OrganizationMembership{}, fault.ErrNotFound
}

// ListOrganizations lists the session user's organizations and roles.
func (s *Service) ListOrganizations(ctx context.Context, token string) ([]OrganizationMembership, error) {
	ls, err := s.session(ctx, token)
	if err != nil {
		return nil, err
	}
	return organizationsOfUser(ctx, s.db, ls.UserID)
}

// ListMembers lists the members of the principal's organization.
func (s *Service) ListMembers(ctx context.Context, p access.Principal) ([]Member, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return nil, err
	}
	return membersOf(ctx, s.db, p.OrganizationID)
}

// ChangeRole changes a member's role. Owners are the only ones who can make
// or unmake owners, and the last owner cannot be demoted.
func (s *Service) ChangeRole(ctx context.Context, p access.Principal, userID string, role access.Role) (Member, error) {
	if err := p.Require(access.PermMemberManage); err != nil {
		return Member{}, err
	}
	var out Member
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		owners, err := lockOwners(ctx, tx, p.OrganizationID)
		if err != nil {
			return err
		}
		current, err := membershipRole(ctx, tx, p.OrganizationID, userID)
		if err != nil {
			return err
		}
		if (current == access.RoleOwner || role == access.RoleOwner) && p.Role != access.RoleOwner {
			return fmt.Errorf("changing an owner: %w", fault.ErrForbidden)
		}
		if current == access.RoleOwner && role != access.RoleOwner && len(owners) <= 1 {
			return ErrLastOwner
		}
		if err := updateRole(ctx, tx, p.OrganizationID, userID, role); err != nil {
			return err
		}
		if err := appendMemberEvent(ctx, tx, p, "member.role_changed", userID,
			map[string]any{"from_role": string(current), "to_role": string(role)}); err != nil {
			return err
		}
		out, err = member(ctx, tx, p.OrganizationID, userID)
		return err
	})
	return out, err
}

// RemoveMember ends a membership; the member's sessions lose the
// organization on their next request.
func (s *Service) RemoveMember(ctx context.Context, p access.Principal, userID string) error {
	if err := p.Require(access.PermMemberManage); err != nil {
		return err
	}
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		owners, err := lockOwners(ctx, tx, p.OrganizationID)
		if err != nil {
			return err
		}
		current, err := membershipRole(ctx, tx, p.OrganizationID, userID)
		if err != nil {
			return err
		}
		if current == access.RoleOwner && p.Role != access.RoleOwner {
			return fmt.Errorf("removing an owner: %w", fault.ErrForbidden)
		}
		if current == access.RoleOwner && len(owners) <= 1 {
			return ErrLastOwner
		}
		if last, err := lastOwnersTeamMember(ctx, tx, p.OrganizationID, userID); err != nil || last {
			return cmp.Or(err, ErrLastOwner)
		}
		if err := deleteMembership(ctx, tx, p.OrganizationID, userID); err != nil {
			return err
		}
		return appendMemberEvent(ctx, tx, p, "member.removed", userID, map[string]any{"role": string(current)})
	})
}

func appendMemberEvent(ctx context.Context, tx *sqlx.Tx, p access.Principal, action, userID string, evidence map[string]any) error {
	return audit.Record(ctx, tx, p, action, "user", userID, evidence)
}

// BootstrapResult describes what Bootstrap did.
type BootstrapResult struct {
	Created      bool
	User         User
	Organization Organization
}

// Bootstrap creates a first account and organization for a local
// installation. It does nothing when the account already exists.
func (s *Service) Bootstrap(ctx context.Context, email, name, password, orgName, orgSlug string) (BootstrapResult, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return BootstrapResult{}, err
	}
	var res BootstrapResult
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		existing, err := userForSignIn(ctx, tx, email)
		if err == nil {
			res.User = existing.User
			orgs, err := organizationsOfUser(ctx, tx, existing.ID)
			if err == nil && len(orgs) > 0 {
				res.Organization = orgs[0].Organization
			}
			return err
		}
		if !errors.Is(err, fault.ErrNotFound) {
			return err
		}
		if err := ValidatePassword(password); err != nil {
			return err
		}
		hash, err := s.hashPassword(ctx, password)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		res.User = User{ID: id.New("usr"), Email: email, Name: name, CreatedAt: now}
		res.Organization = Organization{ID: id.New("org"), Name: orgName, Slug: orgSlug, CreatedAt: now}
		if err := insertUser(ctx, tx, res.User, hash); err != nil {
			return err
		}
		if err := createOrganization(ctx, tx, res.Organization, res.User.ID); err != nil {
			return err
		}
		res.Created = true
		return nil
	})
	return res, err
}

// OperatorOrganization is an organization the operator creates: its slug
// (also its name unless one is given), contact e-mail and the execution
// mode its workspaces default to (remote when empty).
type OperatorOrganization struct {
	Name, Slug, Email, DefaultExecutionMode string
	AllowForceDeleteWorkspaces              bool
}

// ExecutionRemote and ExecutionLocal are the default execution modes.
const (
	ExecutionRemote = "remote"
	ExecutionLocal  = "local"
)

// maxEmail bounds an organization's contact e-mail (RFC 5321's path).
const maxEmail = 254

// CreateOrganizationAsOperator creates an organization without members,
// with its (empty) owners team and Default Project, for the installation
// operator (the remote-backend API's organization create).
func (s *Service) CreateOrganizationAsOperator(ctx context.Context, in OperatorOrganization) (Organization, error) {
	org, err := s.newOrganization(in)
	if err != nil {
		return Organization{}, err
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := insertOrganization(ctx, tx, org, "operator"); err != nil {
			return err
		}
		if _, err := team.CreateEmptyOwnersTeam(ctx, tx, org.ID, org.CreatedAt); err != nil {
			return err
		}
		_, err := audit.Append(ctx, tx, audit.Entry{
			OrganizationID: org.ID, Action: "organization.created",
			Actor:      audit.Actor{Type: audit.ActorOperator, ID: "operator"},
			TargetType: "organization", TargetID: org.ID, Evidence: map[string]any{"slug": org.Slug},
		})
		return err
	})
	return org, err
}

// CreateOrganizationForAccount creates an organization owned by the person
// behind an account-wide token (the remote-backend API's organization
// create, as HCP Terraform's user tokens may): the person becomes its owner,
// in its owners team, exactly as when creating one in the identity server.
func (s *Service) CreateOrganizationForAccount(ctx context.Context, p access.Principal, in OperatorOrganization) (Organization, error) {
	if !p.Account || p.Kind != access.KindUser {
		return Organization{}, fault.ErrForbidden
	}
	org, err := s.newOrganization(in)
	if err != nil {
		return Organization{}, err
	}
	return org, db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error { return createOrganization(ctx, tx, org, p.ID) })
}

// newOrganization validates the remote-backend API's organization settings.
func (s *Service) newOrganization(in OperatorOrganization) (Organization, error) {
	if err := ValidateSlug(in.Slug); err != nil {
		return Organization{}, err
	}
	name := in.Name
	if name == "" {
		name = in.Slug
	}
	name, err := ValidateName(name)
	if err != nil {
		return Organization{}, err
	}
	mode := in.DefaultExecutionMode
	if mode == "" {
		mode = ExecutionRemote
	}
	if mode != ExecutionRemote && mode != ExecutionLocal {
		return Organization{}, fmt.Errorf("%w: default execution mode must be local or remote", fault.ErrValidation)
	}
	if len(in.Email) > maxEmail {
		return Organization{}, fmt.Errorf("%w: email is over %d bytes", fault.ErrValidation, maxEmail)
	}
	return Organization{ID: id.New("org"), Name: name, Slug: in.Slug, CreatedAt: s.now().UTC().Truncate(time.Microsecond),
		DefaultExecutionMode: mode, Email: in.Email, AllowForceDeleteWorkspaces: in.AllowForceDeleteWorkspaces}, nil
}

// SetAllowForceDeleteWorkspaces changes whether workspace admins may delete
// a workspace that still manages resources. Only owners (and the operator)
// may: the rule keeps that power to owners, so an admin may not lift it.
func (s *Service) SetAllowForceDeleteWorkspaces(ctx context.Context, tx *sqlx.Tx, p access.Principal, allow bool) (Organization, error) {
	if p.Role != access.RoleOwner || p.Agent != nil || (p.Kind != access.KindUser && p.Kind != access.KindOperator) {
		return Organization{}, fmt.Errorf("only organization owners change allow-force-delete-workspaces: %w", fault.ErrForbidden)
	}
	before, err := organizationByID(ctx, tx, p.OrganizationID)
	if err != nil || before.AllowForceDeleteWorkspaces == allow {
		return before, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE organizations SET allow_force_delete_workspaces = $2 WHERE id = $1`, p.OrganizationID, allow); err != nil {
		return Organization{}, fmt.Errorf("writing organization settings: %w", err)
	}
	if err := audit.Record(ctx, tx, p, "organization.settings_updated", "organization", p.OrganizationID,
		map[string]any{"allow_force_delete_workspaces": allow}); err != nil {
		return Organization{}, err
	}
	before.AllowForceDeleteWorkspaces = allow
	return before, nil
}

// Organization reads the principal's own organization.
func (s *Service) Organization(ctx context.Context, p access.Principal) (Organization, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return Organization{}, err
	}
	return organizationByID(ctx, s.db, p.OrganizationID)
}

// SetDefaultExecutionMode changes the execution mode a workspace created
// without one takes; existing workspaces keep theirs. Organization admins
// only.
func (s *Service) SetDefaultExecutionMode(ctx context.Context, tx *sqlx.Tx, p access.Principal, mode string) (Organization, error) {
	if err := p.Require(access.PermMemberManage); err != nil {
		return Organization{}, err
	}
	if mode != "local" && mode != "remote" {
		return Organization{}, fmt.Errorf("%w: default execution mode must be local or remote", fault.ErrValidation)
	}
	before, err := organizationByID(ctx, tx, p.OrganizationID)
	if err != nil {
		return Organization{}, err
	}
	if before.DefaultExecutionMode == mode {
		return before, nil
	}
	if err := updateDefaultExecutionMode(ctx, tx, p.OrganizationID, mode); err != nil {
		return Organization{}, err
	}
	if err := audit.Record(ctx, tx, p, "organization.settings_updated", "organization", p.OrganizationID,
		map[string]any{"default_execution_mode": mode, "previous_default_execution_mode": before.DefaultExecutionMode}); err != nil {
		return Organization{}, err
	}
	after := before
	after.DefaultExecutionMode = mode
	return after, nil
}

// OrganizationByID reads an organization.
func (s *Service) OrganizationByID(ctx context.Context, organizationID string) (Organization, error) {
	return organizationByID(ctx, s.db, organizationID)
}

// DeleteOrganization deletes, in tx, an organization that has no
// workspaces left (the caller deletes them first, in the same
// transaction), with its memberships, projects, tags, tokens and service
// accounts. Audit events stay: they are evidence.
func (s *Service) DeleteOrganization(ctx context.Context, tx *sqlx.Tx, organizationID string) error {
	var workspaces int
	if err := tx.GetContext(ctx, &workspaces, `SELECT count(*) FROM workspaces WHERE organization_id = $1`, organizationID); err != nil {
		return fmt.Errorf("counting workspaces: %w", err)
	}
	if workspaces > 0 {
		return fmt.Errorf("organization still has %d workspaces: %w", workspaces, fault.ErrConflict)
	}
	return deleteOrganizationTree(ctx, tx, organizationID)
}

// OrganizationsAsOperator lists every organization whose slug or e-mail
// contains query (case-insensitively; every one when empty), by slug: the
// operator's view of the installation.
func (s *Service) OrganizationsAsOperator(ctx context.Context, query string) ([]Organization, error) {
	out := []Organization{}
	if err := s.db.SelectContext(ctx, &out, `SELECT `+organizationColumns+` FROM organizations
		WHERE strpos(lower(slug), lower($1)) > 0 OR strpos(lower(email), lower($1)) > 0 ORDER BY slug`, query); err != nil {
		return nil, fmt.Errorf("listing organizations: %w", err)
	}
	return out, nil
}

// SetEmail changes the organization's contact e-mail; member managers
// only.
func (s *Service) SetEmail(ctx context.Context, tx *sqlx.Tx, p access.Principal, email string) (Organization, error) {
	if err := p.Require(access.PermMemberManage); err != nil {
		return Organization{}, err
	}
	if len(email) > maxEmail {
		return Organization{}, fmt.Errorf("%w: email is over %d bytes", fault.ErrValidation, maxEmail)
	}
	before, err := organizationByID(ctx, tx, p.OrganizationID)
	if err != nil || before.Email == email {
		return before, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE organizations SET email = $2 WHERE id = $1`, p.OrganizationID, email); err != nil {
		return Organization{}, fmt.Errorf("writing organization settings: %w", err)
	}
	// The address itself stays out of the evidence (audit events carry no
	// e-mail addresses).
	if err := audit.Record(ctx, tx, p, "organization.settings_updated", "organization", p.OrganizationID,
		map[string]any{"email_changed": true}); err != nil {
		return Organization{}, err
	}
	before.Email = email
	return before, nil
}
