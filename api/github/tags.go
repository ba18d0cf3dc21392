package github

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/db"
)

// TagPush is a created tag of a repository selected in a connected,
// bound installation, as a delivery announced it.
type TagPush struct {
	DeliveryID string
	Repository Repository
	// Tag is the tag's name, without refs/tags/.
	Tag string
	// ObjectSHA is what the pushed ref names: the commit of a lightweight
	// tag, or the tag object of an annotated one.
	ObjectSHA string
}

// TagAcceptance is what a tag push became: the ingestions it created or
// reused, or (none) the safe reason why nothing was.
type TagAcceptance struct {
	IngestionIDs []string
	Outcome      string
}

// TagPublisher publishes what a tag push concerns (the registry's modules
// bound to the repository). AcceptTag runs inside the delivery's one
// acceptance transaction: it creates or reuses its ingestions, dispatches
// each new one exactly once and writes their audit events there, and
// calls no provider.
type TagPublisher interface {
	AcceptTag(ctx context.Context, tx *sqlx.Tx, t TagPush, now time.Time) (TagAcceptance, error)
}

// receiveTag handles a push of refs/tags/NAME.
func (s *Service) receiveTag(ctx context.Context, d Delivery, p pushPayload, tag string) (DeliveryResult, error) {
	switch {
	case p.Deleted:
		return s.settle(ctx, d, ResultIgnored, "tag_deleted", nil)
	case !p.Created:
		return s.settle(ctx, d, ResultIgnored, "tag_not_created", nil)
	case tag == "" || !printable(tag, 255) || !isSHA(p.After) || d.RepositoryID == nil:
		return s.settle(ctx, d, ResultIgnored, "payload_incomplete", nil)
	case s.opts.Tags == nil:
		return s.settle(ctx, d, ResultIgnored, "tag_not_handled", nil)
	}
	repo, err := boundRepository(ctx, s.db, *d.InstallationID, *d.RepositoryID)
	if err != nil {
		return DeliveryResult{}, err
	}
	if repo == nil {
		return s.settle(ctx, d, ResultIgnored, "repository_not_bound", nil)
	}
	now := s.stamp()
	d.ReceivedAt, d.SettledAt = now, now
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		acc, err := s.opts.Tags.AcceptTag(ctx, tx, TagPush{DeliveryID: d.DeliveryID, Repository: *repo, Tag: tag,
			ObjectSHA: p.After}, now)
		if err != nil {
			return fmt.Errorf("accepting tag push: %w", err)
		}
		d.IngestionIDs = pq.StringArray(acc.IngestionIDs)
		if d.IngestionIDs == nil {
			d.IngestionIDs = pq.StringArray{}
		}
		d.Result, d.Outcome = ResultAccepted, "ingested"
		if len(acc.IngestionIDs) == 0 {
			d.Result, d.Outcome = ResultIgnored, acc.Outcome
		}
		inserted, err := insertDelivery(ctx, tx, d)
		if err == nil && !inserted {
			// Rolled back: the winner's record is the answer.
			err = errLostRace
		}
		return err
	})
	if errors.Is(err, errLostRace) {
		return s.reread(ctx, d)
	}
	if err != nil {
		return DeliveryResult{}, err
	}
	return DeliveryResult{Delivery: d}, nil
}

// SelectedRepository is a repository selected in the organization's
// connected installation, or nil: what a binding to the repository (a
// workspace's source, a registry module's) must name.
func SelectedRepository(ctx context.Context, q sqlx.QueryerContext, organizationID string, repositoryID int64) (*Repository, error) {
	return selectedRepository(ctx, q, organizationID, repositoryID)
}
