package github

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// reconciling are the lifecycle actions that fetch the installation's
// current state from the provider and reconcile with it.
var reconciling = map[string]map[string]bool{
	"installation":              {"created": true, "suspend": true, "unsuspend": true, "new_permissions_accepted": true},
	"installation_repositories": {"added": true, "removed": true},
}

// receiveLifecycle applies an installation or installation_repositories
// delivery (SPEC §6 rule 6). Every one advances the installation's fence;
// only bound installations change; deletion revokes without a provider
// read; recognized actions read, fetch and compare the fence up to three
// times, and a persistent race acknowledges nothing.
func (s *Service) receiveLifecycle(ctx context.Context, d Delivery) (DeliveryResult, error) {
	installationID := *d.InstallationID
	action := ""
	if d.Action != nil {
		action = *d.Action
	}
	if d.Event == "installation" && action == "deleted" {
		return s.settleLifecycle(ctx, d, func(tx *sqlx.Tx, in *Installation) (string, string, error) {
			now := s.stamp()
			if err := advanceFence(ctx, tx, installationID, true, now); err != nil {
				return "", "", err
			}
			if in == nil {
				return ResultIgnored, "installation_unbound", nil
			}
			if in.Status != StatusRevoked {
				in.Status, in.RevokedAt, in.UpdatedAt = StatusRevoked, &now, now
				if err := saveInstallationStatus(ctx, tx, *in); err != nil {
					return "", "", err
				}
			}
			if err := deselectAll(ctx, tx, installationID, now); err != nil {
				return "", "", err
			}
			return ResultAccepted, "revoked", s.auditInstallation(ctx, tx, *in, "github_installation.revoked")
		})
	}
	if !reconciling[d.Event][action] {
		return s.settleLifecycle(ctx, d, func(tx *sqlx.Tx, in *Installation) (string, string, error) {
			return ResultIgnored, "action_not_handled", advanceFence(ctx, tx, installationID, false, s.stamp())
		})
	}
	for range FenceRetries {
		fence, err := readFence(ctx, s.db, installationID)
		if err != nil {
			return DeliveryResult{}, err
		}
		bound, err := installationByID(ctx, s.db, installationID, false)
		if err != nil {
			return DeliveryResult{}, err
		}
		var remote ProviderInstallation
		var repos []ProviderRepository
		gone := false
		if bound != nil && bound.Status != StatusRevoked {
			remote, err = s.app.Installation(ctx, installationID)
			switch {
			case err == errGone:
				gone = true
			case err != nil:
				return DeliveryResult{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
			case !remote.Suspended:
				if repos, err = s.app.Repositories(ctx, installationID); err != nil {
					return DeliveryResult{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
				}
			}
		}
		raced := false
		res, err := s.settleLifecycle(ctx, d, func(tx *sqlx.Tx, in *Installation) (string, string, error) {
			now := s.stamp()
			f, err := lockFence(ctx, tx, installationID, now)
			if err != nil {
				return "", "", err
			}
			if f.Fence != fence {
				raced = true
				return "", "", errRaced
			}
			if err := advanceFence(ctx, tx, installationID, gone, now); err != nil {
				return "", "", err
			}
			switch {
			case in == nil:
				return ResultIgnored, "installation_unbound", nil
			case in.Status == StatusRevoked || f.RevokedAt != nil:
				return ResultIgnored, "installation_revoked", nil
			case bound == nil:
				// Bound between the read and the lock: the fence did not
				// move, but this pass fetched nothing. Try again.
				raced = true
				return "", "", errRaced
			case gone:
				in.Status, in.RevokedAt, in.UpdatedAt = StatusRevoked, &now, now
				if err := saveInstallationStatus(ctx, tx, *in); err != nil {
					return "", "", err
				}
				return ResultAccepted, "revoked", deselectAll(ctx, tx, installationID, now)
			}
			status := StatusConnected
			if remote.Suspended {
				status = StatusSuspended
			}
			if in.Status != status || in.AccountLogin != remote.AccountLogin {
				in.Status, in.AccountLogin, in.UpdatedAt = status, remote.AccountLogin, now
				if status == StatusSuspended {
					in.SuspendedAt = &now
				}
				if err := saveInstallationStatus(ctx, tx, *in); err != nil {
					return "", "", err
				}
				if err := s.auditInstallation(ctx, tx, *in, "github_installation."+status); err != nil {
					return "", "", err
				}
			}
			if status == StatusConnected {
				refused, err := reconcileRepositories(ctx, tx, *in, repos, now)
				if err != nil {
					return "", "", err
				}
				if len(refused) > 0 {
					s.logger.WarnContext(ctx, "repositories of another organization left in place",
						"installation_id", installationID, "repositories", len(refused))
				}
			}
			return ResultAccepted, "reconciled", nil
		})
		if raced {
			continue
		}
		return res, err
	}
	return DeliveryResult{}, ErrFenceRace
}

var errRaced = fmt.Errorf("installation fence moved")

// settleLifecycle runs fn and records the delivery in one transaction,
// with the bound installation (nil when unbound) locked.
func (s *Service) settleLifecycle(ctx context.Context, d Delivery, fn func(tx *sqlx.Tx, in *Installation) (string, string, error)) (DeliveryResult, error) {
	now := s.stamp()
	d.ReceivedAt, d.SettledAt = now, now
	lost := false
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := lockFence(ctx, tx, *d.InstallationID, now); err != nil {
			return err
		}
		in, err := installationByID(ctx, tx, *d.InstallationID, true)
		if err != nil {
			return err
		}
		if d.Result, d.Outcome, err = fn(tx, in); err != nil {
			return err
		}
		inserted, err := insertDelivery(ctx, tx, d)
		if err != nil {
			return err
		}
		if !inserted {
			lost = true
			return errLostRace
		}
		return nil
	})
	if lost {
		return s.reread(ctx, d)
	}
	if err != nil {
		return DeliveryResult{}, err
	}
	return DeliveryResult{Delivery: d}, nil
}

func (s *Service) auditInstallation(ctx context.Context, tx *sqlx.Tx, in Installation, action string) error {
	_, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: in.OrganizationID, Action: action,
		Actor: audit.Actor{Type: audit.ActorSystem, ID: "github-app"}, TargetType: "github_installation",
		TargetID: fmt.Sprint(in.InstallationID), Evidence: map[string]any{"status": in.Status}})
	return err
}
