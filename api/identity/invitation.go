package identity

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/team"
)

// Invitation statuses. A pending invitation past its expiry is shown as
// expired and stored as such once someone invites the address again.
const (
	InvitationPending  = "pending"
	InvitationAccepted = "accepted"
	InvitationRejected = "rejected"
	InvitationCanceled = "canceled"
	InvitationExpired  = "expired"
)

// InvitationTokenPrefix starts every invitation token.
const InvitationTokenPrefix = "cit_"

const (
	// invitationTTL is how long an invitation can be accepted.
	invitationTTL = 7 * 24 * time.Hour
	// maxOpenInvitations bounds an organization's pending invitations.
	maxOpenInvitations = 200
)

// Invitation asks the holder of an e-mail address to join an organization
// with a role. E-mail addresses are not verified, so owning an account with
// the address is not enough to join: the invitee must also present the
// token the inviter received once and handed over.
type Invitation struct {
	ID               string      `db:"id" json:"id"`
	OrganizationID   string      `db:"organization_id" json:"organization_id"`
	OrganizationName string      `db:"organization_name" json:"organization_name"`
	Email            string      `db:"email" json:"email"`
	Role             access.Role `db:"role" json:"role"`
	// InviterID is empty for the installation operator, whose authority
	// does not lapse.
	InviterID   string    `db:"inviter_id" json:"inviter_id"`
	InviterName string    `db:"inviter_name" json:"inviter_name"`
	Status      string    `db:"status" json:"status"`
	CreatedAt   time.Time `db:"created_at" json:"created_at"`
	ExpiresAt   time.Time `db:"expires_at" json:"expires_at"`
}

// statusAt is the status as of now: pending turns expired at expires_at.
func (inv Invitation) statusAt(now time.Time) string {
	if inv.Status == InvitationPending && !now.Before(inv.ExpiresAt) {
		return InvitationExpired
	}
	return inv.Status
}

// open is nil while the invitation can still be accepted, declined or
// canceled.
func (inv Invitation) open(now time.Time) error {
	switch inv.statusAt(now) {
	case InvitationPending:
		return nil
	case InvitationExpired:
		return ErrInvitationExpired
	}
	return ErrInvitationClosed
}

// mayGrant reports whether a member with role granter may bring someone
// in as role: member managers may, and only owners grant owner.
func mayGrant(granter, role access.Role) bool {
	return access.PermissionsOf(granter).Has(access.PermMemberManage) && (role != access.RoleOwner || granter == access.RoleOwner)
}

func (s *Service) invitationTokenHash(token string) []byte {
	m := hmac.New(sha256.New, s.opts.InvitationKey)
	m.Write([]byte("invitation\x00" + token))
	return m.Sum(nil)
}

// InviteMember invites an e-mail address into the principal's organization
// with a role. Nothing changes for an account that has the address until it
// accepts with the returned token, which is shown only here and stored only
// as a keyed hash.
func (s *Service) InviteMember(ctx context.Context, p access.Principal, email string, role access.Role) (Invitation, string, error) {
	var inv Invitation
	var token string
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		inv, token, err = s.InviteMemberTx(ctx, tx, p, email, role)
		return err
	})
	if err != nil {
		return Invitation{}, "", err
	}
	return inv, token, nil
}

// InviteMemberTx is InviteMember in the caller's transaction, for callers
// that do more with the invitation before it commits (put it in teams).
func (s *Service) InviteMemberTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, email string, role access.Role) (Invitation, string, error) {
	if err := p.Require(access.PermMemberManage); err != nil {
		return Invitation{}, "", err
	}
	if (p.Kind != access.KindUser && p.Kind != access.KindOperator) || !mayGrant(p.Role, role) {
		return Invitation{}, "", fmt.Errorf("inviting as %s: %w", role, fault.ErrForbidden)
	}
	email, err := NormalizeEmail(email)
	if err != nil {
		return Invitation{}, "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Invitation{}, "", fmt.Errorf("generating invitation token: %w", err)
	}
	token := InvitationTokenPrefix + tokenEncoding.EncodeToString(raw)
	now := s.now().UTC().Truncate(time.Microsecond)
	inv := Invitation{
		ID: id.New("inv"), OrganizationID: p.OrganizationID, Email: email, Role: role, InviterID: memberID(p),
		InviterName: p.Name, Status: InvitationPending, CreatedAt: now, ExpiresAt: now.Add(invitationTTL),
	}
	org, err := organizationByID(ctx, tx, p.OrganizationID)
	if err != nil {
		return Invitation{}, "", err
	}
	inv.OrganizationName = org.Name
	if member, err := isMemberByEmail(ctx, tx, p.OrganizationID, email); err != nil {
		return Invitation{}, "", err
	} else if member {
		return Invitation{}, "", ErrMemberExists
	}
	if err := expireInvitations(ctx, tx, p.OrganizationID, email, now); err != nil {
		return Invitation{}, "", err
	}
	open, err := countOpenInvitations(ctx, tx, p.OrganizationID, now)
	if err != nil {
		return Invitation{}, "", err
	}
	if open >= maxOpenInvitations {
		return Invitation{}, "", ErrTooManyInvitations
	}
	if err := insertInvitation(ctx, tx, inv, s.invitationTokenHash(token)); err != nil {
		return Invitation{}, "", err
	}
	err = audit.Record(ctx, tx, p, "invitation.created", "invitation", inv.ID,
		map[string]any{"email": email, "role": string(role), "expires_at": inv.ExpiresAt})
	if err != nil {
		return Invitation{}, "", err
	}
	return inv, token, nil
}

// memberID is the user who invites or cancels: none for the installation
// operator (which administers every organization on /api/v2 and has no
// account).
func memberID(p access.Principal) string {
	if p.Kind == access.KindOperator {
		return ""
	}
	return p.ID
}

// ListInvitations lists the principal's organization's pending invitations
// (expired ones included, so they can be seen and replaced), newest first.
func (s *Service) ListInvitations(ctx context.Context, p access.Principal) ([]Invitation, error) {
	if err := p.Require(access.PermMemberManage); err != nil {
		return nil, err
	}
	invs, err := pendingInvitationsOf(ctx, s.db, p.OrganizationID, maxOpenInvitations)
	now := s.now()
	for i := range invs {
		invs[i].Status = invs[i].statusAt(now)
	}
	return invs, err
}

// CancelInvitation revokes a pending invitation of the principal's
// organization. An invitation to the owner role is an owner's to revoke.
func (s *Service) CancelInvitation(ctx context.Context, p access.Principal, invitationID string) (Invitation, error) {
	if err := p.Require(access.PermMemberManage); err != nil {
		return Invitation{}, err
	}
	var inv Invitation
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		inv, _, err = lockInvitation(ctx, tx, invitationID)
		if err != nil {
			return err
		}
		if inv.OrganizationID != p.OrganizationID {
			return fault.ErrNotFound
		}
		if !mayGrant(p.Role, inv.Role) {
			return fmt.Errorf("canceling an invitation as %s: %w", inv.Role, fault.ErrForbidden)
		}
		// An expired invitation may be canceled too: that is how the
		// inviter's list is tidied.
		if inv.Status != InvitationPending {
			return ErrInvitationClosed
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if err := closeInvitation(ctx, tx, inv.ID, InvitationCanceled, memberID(p), now); err != nil {
			return err
		}
		if err := team.DropInvitation(ctx, tx, inv.ID); err != nil {
			return err
		}
		inv.Status = InvitationCanceled
		return audit.Record(ctx, tx, p, "invitation.canceled", "invitation", inv.ID,
			map[string]any{"email": inv.Email, "role": string(inv.Role)})
	})
	return inv, err
}

// ListUserInvitations lists the open invitations addressed to the e-mail
// of the session's account.
func (s *Service) ListUserInvitations(ctx context.Context, token string) ([]Invitation, error) {
	ls, err := s.session(ctx, token)
	if err != nil {
		return nil, err
	}
	return openInvitationsFor(ctx, s.db, ls.UserEmail, s.now().UTC(), maxOpenInvitations)
}

// AcceptInvitation makes the session's account a member with the
// invitation's role and switches the session to the organization. The
// account's e-mail must be the invited one and the token must be the
// invitation's; anything else is not found, whatever the reason. The
// inviter must still be allowed to grant the role, so the invitations of
// someone removed or demoted die with their authority.
func (s *Service) AcceptInvitation(ctx context.Context, sessionToken, invitationID, invitationToken string) (OrganizationMembership, error) {
	ls, err := s.session(ctx, sessionToken)
	if err != nil {
		return OrganizationMembership{}, err
	}
	var out OrganizationMembership
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		inv, err := s.lockInvitationFor(ctx, tx, ls, invitationID, invitationToken)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if err := inv.open(now); err != nil {
			return err
		}
		if inv.InviterID != "" {
			granter, err := lockMembershipRole(ctx, tx, inv.OrganizationID, inv.InviterID)
			if errors.Is(err, fault.ErrNotFound) || (err == nil && !mayGrant(granter, inv.Role)) {
				return fmt.Errorf("the inviter may no longer grant %s: %w", inv.Role, ErrInvitationClosed)
			}
			if err != nil {
				return err
			}
		}
		if err := insertMembership(ctx, tx, inv.OrganizationID, ls.UserID, inv.Role, inv.ID, JoinedByPassword); err != nil {
			return err
		}
		if err := closeInvitation(ctx, tx, inv.ID, InvitationAccepted, ls.UserID, now); err != nil {
			return err
		}
		if err := setActiveOrganization(ctx, tx, ls.ID, inv.OrganizationID); err != nil {
			return err
		}
		if err := appendInviteeEvent(ctx, tx, inv, ls.UserID, "invitation.accepted"); err != nil {
			return err
		}
		if _, err := audit.Append(ctx, tx, audit.Entry{
			OrganizationID: inv.OrganizationID, Action: "member.added", Actor: audit.Actor{Type: audit.ActorUser, ID: ls.UserID},
			TargetType: "user", TargetID: ls.UserID,
			Evidence: map[string]any{"role": string(inv.Role), "invitation_id": inv.ID, "invited_by": inv.InviterID},
		}); err != nil {
			return err
		}
		// The teams the invitee was put in while invited are joined now,
		// each audited as the invitee's own joining.
		teams, err := team.JoinInvitedTeams(ctx, tx, inv.ID, ls.UserID)
		if err != nil {
			return err
		}
		for _, teamID := range teams {
			if _, err := audit.Append(ctx, tx, audit.Entry{
				OrganizationID: inv.OrganizationID, Action: "team.member_added", Actor: audit.Actor{Type: audit.ActorUser, ID: ls.UserID},
				TargetType: "team", TargetID: teamID, Evidence: map[string]any{"user_id": ls.UserID, "invitation_id": inv.ID},
			}); err != nil {
				return err
			}
		}
		org, err := organizationByID(ctx, tx, inv.OrganizationID)
		out = OrganizationMembership{Organization: org, Role: inv.Role}
		return err
	})
	return out, err
}

// RejectInvitation declines an open invitation addressed to the session's
// e-mail. Declining needs the token as accepting does: e-mail addresses are
// not verified, so an account registered under a colleague's address could
// otherwise close every invitation the colleague is sent.
func (s *Service) RejectInvitation(ctx context.Context, sessionToken, invitationID, invitationToken string) (Invitation, error) {
	ls, err := s.session(ctx, sessionToken)
	if err != nil {
		return Invitation{}, err
	}
	var inv Invitation
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		inv, err = s.lockInvitationFor(ctx, tx, ls, invitationID, invitationToken)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if err := inv.open(now); err != nil {
			return err
		}
		if err := closeInvitation(ctx, tx, inv.ID, InvitationRejected, ls.UserID, now); err != nil {
			return err
		}
		if err := team.DropInvitation(ctx, tx, inv.ID); err != nil {
			return err
		}
		inv.Status = InvitationRejected
		return appendInviteeEvent(ctx, tx, inv, ls.UserID, "invitation.rejected")
	})
	return inv, err
}

// lockInvitationFor locks the invitation the session's account presents
// with its token. Another address or another token is not found, whatever
// the reason, exactly like an invitation that does not exist.
func (s *Service) lockInvitationFor(ctx context.Context, tx *sqlx.Tx, ls liveSession, invitationID, invitationToken string) (Invitation, error) {
	inv, tokenHash, err := lockInvitation(ctx, tx, invitationID)
	if err != nil {
		return Invitation{}, err
	}
	if inv.Email != ls.UserEmail || !hmac.Equal(tokenHash, s.invitationTokenHash(invitationToken)) {
		return Invitation{}, fault.ErrNotFound
	}
	return inv, nil
}

// appendInviteeEvent records what the invitee did with an invitation, in
// the inviting organization (the invitee is not a member of it, or not
// yet, so the event is not audit.Record's).
func appendInviteeEvent(ctx context.Context, tx *sqlx.Tx, inv Invitation, userID, action string) error {
	_, err := audit.Append(ctx, tx, audit.Entry{
		OrganizationID: inv.OrganizationID, Action: action, Actor: audit.Actor{Type: audit.ActorUser, ID: userID},
		TargetType: "invitation", TargetID: inv.ID, Evidence: map[string]any{"email": inv.Email, "role": string(inv.Role)},
	})
	return err
}
