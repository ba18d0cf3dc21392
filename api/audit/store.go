package audit

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/reqid"
)

// Append writes one sanitized event inside the caller's transaction, so the
// evidence exists exactly when the mutation it describes committed.
func Append(ctx context.Context, tx sqlx.ExtContext, e Entry) (string, error) {
	evidence, err := Sanitize(e)
	if err != nil {
		return "", err
	}
	eventID := id.New("aud")
	_, err = tx.ExecContext(ctx, `
		INSERT INTO audit_events
			(id, organization_id, action, actor_type, actor_id, target_type, target_id, request_id, evidence)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		eventID, e.OrganizationID, e.Action, e.Actor.Type, e.Actor.ID, e.TargetType, e.TargetID,
		reqid.From(ctx), string(evidence))
	if err != nil {
		return "", fmt.Errorf("appending audit event: %w", err)
	}
	return eventID, nil
}

// listEvents reads one page of an organization's events, newest first,
// fetching one extra row so the caller can tell whether a next page exists.
// An operator's launch-control events belong in the tenant's trail, but
// the operator's reason does not: events recorded before suspensions were
// versioned carried it, so it is left out when read.
func listEvents(ctx context.Context, q sqlx.QueryerContext, organizationID string, filter Filter, page cursor.Page) ([]Event, error) {
	query := `
		SELECT id, organization_id, action, actor_type, actor_id, target_type, target_id, request_id,
		       CASE WHEN actor_type = 'operator' AND action LIKE 'launch.%' THEN evidence - 'reason' ELSE evidence END AS evidence,
		       created_at
		FROM audit_events
		WHERE organization_id = $1`
	args := []any{organizationID}
	if filter.Action != "" {
		args = append(args, filter.Action)
		query += fmt.Sprintf(" AND action = $%d", len(args))
	}
	if filter.ActorID != "" {
		args = append(args, filter.ActorID)
		query += fmt.Sprintf(" AND actor_id = $%d", len(args))
	}
	keyset, args := page.Keyset(args, "created_at", "id")
	query += keyset + page.OrderLimit("created_at", "id")
	var events []Event
	if err := sqlx.SelectContext(ctx, q, &events, query, args...); err != nil {
		return nil, fmt.Errorf("listing audit events: %w", err)
	}
	return events, nil
}

// ActorOf names the principal as an audit actor.
func ActorOf(p access.Principal) Actor {
	switch p.Kind {
	case access.KindServiceAccount:
		return Actor{Type: ActorServiceAccount, ID: p.ID}
	case access.KindOperator:
		return Actor{Type: ActorOperator, ID: p.ID}
	case access.KindRun:
		return Actor{Type: ActorRun, ID: p.ID}
	case access.KindCodeHost, access.KindSCIM, access.KindRunTrigger:
		return Actor{Type: ActorSystem, ID: p.ID}
	case access.KindTeam:
		return Actor{Type: ActorTeam, ID: p.ID}
	}
	return Actor{Type: ActorUser, ID: p.ID}
}

// Record appends an event done by p in p's organization. An agent acting
// for a person is recorded as that person, naming the client and grant it
// acted through, so the trail tells what the person did from what an agent
// did in their name.
func Record(ctx context.Context, tx sqlx.ExtContext, p access.Principal, action, targetType, targetID string, evidence map[string]any) error {
	if p.Agent != nil {
		withAgent := make(map[string]any, len(evidence)+2)
		for k, v := range evidence {
			withAgent[k] = v
		}
		withAgent["agent_client_id"], withAgent["agent_grant_id"] = p.Agent.ClientID, p.Agent.GrantID
		evidence = withAgent
	}
	_, err := Append(ctx, tx, Entry{
		OrganizationID: p.OrganizationID, Action: action, Actor: ActorOf(p),
		TargetType: targetType, TargetID: targetID, Evidence: evidence,
	})
	return err
}
