package workspace

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// Remote-state sharing: a workspace (the producer) lets the runs of other
// workspaces (its consumers) read its current state and outputs, either
// every workspace of its organization (GlobalRemoteState) or the ones it
// lists. It changes nothing for people and teams, whose own permissions
// decide what they read; the remote-backend API enforces it on run tokens
// with SharesStateWith.

// ErrSelfConsumer means a workspace was named as its own consumer: it
// always reads its own state.
var ErrSelfConsumer = fmt.Errorf("%w: a workspace cannot consume its own state (it always reads it)", ErrInvalid)

// ErrSharedGlobally means consumers were added while the workspace shares
// its state with every workspace, when a list has no effect.
var ErrSharedGlobally = fmt.Errorf("%w: the workspace shares its state with every workspace (global remote state); consumers are added only while it does not", ErrInvalid)

// Sharing is with whom a workspace shares its state.
type Sharing struct {
	WorkspaceID string
	Global      bool
	// Consumers are the listed workspaces the reader may see, by name.
	// The list is kept, without effect, while Global is set.
	Consumers []Workspace
}

// SharesStateWith reports whether the producer's state is readable by the
// consumer's runs: the producer shares it globally or lists the consumer.
// A workspace always shares with itself. It checks no principal: the
// caller is deciding what a run token of the consumer may read.
func SharesStateWith(ctx context.Context, q sqlx.QueryerContext, organizationID, producerID, consumerID string) (bool, error) {
	if producerID == consumerID {
		return true, nil
	}
	var shared bool
	err := sqlx.GetContext(ctx, q, &shared, `
		SELECT EXISTS (SELECT 1 FROM workspaces p
			WHERE p.organization_id = $1 AND p.id = $2
			  AND EXISTS (SELECT 1 FROM workspaces c WHERE c.organization_id = $1 AND c.id = $3)
			  AND (p.global_remote_state OR EXISTS (SELECT 1 FROM workspace_remote_state_consumers x
					WHERE x.workspace_id = p.id AND x.consumer_workspace_id = $3)))`,
		organizationID, producerID, consumerID)
	if err != nil {
		return false, fmt.Errorf("reading remote-state sharing: %w", err)
	}
	return shared, nil
}

// Sharing reads with whom a workspace the principal reads shares its
// state; the consumers it cannot read are left out.
func (s *Service) Sharing(ctx context.Context, p access.Principal, workspaceID string) (Sharing, error) {
	w, err := visibleWorkspace(ctx, s.db, p, workspaceID, access.PermWorkspaceRead, false)
	if err != nil {
		return Sharing{}, err
	}
	return s.sharingOf(ctx, s.db, p, w)
}

func (s *Service) sharingOf(ctx context.Context, q sqlx.QueryerContext, p access.Principal, w Workspace) (Sharing, error) {
	listed, err := listConsumers(ctx, q, w.OrganizationID, w.ID)
	if err != nil {
		return Sharing{}, err
	}
	out := Sharing{WorkspaceID: w.ID, Global: w.GlobalRemoteState, Consumers: []Workspace{}}
	for _, c := range listed {
		if p.CanReadWorkspace(c.ID, c.ProjectID) {
			out.Consumers = append(out.Consumers, c)
		}
	}
	return out, nil
}

// ConsumersPage is a page of the workspaces that may read a workspace's
// state, as the remote-backend API lists them: the listed consumers, or
// every other workspace while it shares globally; only those the principal
// may read, by name.
func (s *Service) ConsumersPage(ctx context.Context, p access.Principal, workspaceID string, number, size int) ([]Workspace, int, error) {
	w, err := visibleWorkspace(ctx, s.db, p, workspaceID, access.PermWorkspaceRead, false)
	if err != nil {
		return nil, 0, err
	}
	return consumersPage(ctx, s.db, w, p.WorkspaceScope(), p.WorkspaceID, p.ProjectID, number, size)
}

// SetGlobalRemoteState shares the workspace's state with every workspace
// of its organization, or stops doing so (its list then applies again).
// Changing it needs workspace:admin; setting the value it has changes
// nothing and needs no more than reading the workspace.
func (s *Service) SetGlobalRemoteState(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, global bool) (Workspace, error) {
	w, err := visibleWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceRead, true)
	if err != nil {
		return Workspace{}, err
	}
	if w.GlobalRemoteState == global {
		return w, nil
	}
	if err := p.RequireIn(w.ID, w.ProjectID, access.PermWorkspaceAdmin); err != nil {
		return Workspace{}, err
	}
	w.GlobalRemoteState, w.UpdatedAt = global, s.stamp()
	if err := setGlobalRemoteState(ctx, tx, w); err != nil {
		return Workspace{}, err
	}
	return w, recordSharingChange(ctx, tx, p, w, map[string]any{"global": global})
}

// AddRemoteStateConsumers lists more consumers of the workspace's state,
// only while it does not share globally; ones already listed are kept.
func (s *Service) AddRemoteStateConsumers(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, consumerIDs []string) error {
	w, consumers, err := s.sharingForWrite(ctx, tx, p, workspaceID, consumerIDs)
	if err != nil {
		return err
	}
	if w.GlobalRemoteState {
		return ErrSharedGlobally
	}
	added, err := insertConsumers(ctx, tx, w, consumers, p.ID)
	if err != nil || len(added) == 0 {
		return err
	}
	return recordSharingChange(ctx, tx, p, w, map[string]any{"added": added})
}

// RemoveRemoteStateConsumers takes consumers off the list; ones not on it
// are ignored.
func (s *Service) RemoveRemoteStateConsumers(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, consumerIDs []string) error {
	w, consumers, err := s.sharingForWrite(ctx, tx, p, workspaceID, consumerIDs)
	if err != nil {
		return err
	}
	removed, err := deleteConsumers(ctx, tx, w, consumers)
	if err != nil || len(removed) == 0 {
		return err
	}
	return recordSharingChange(ctx, tx, p, w, map[string]any{"removed": removed})
}

// ReplaceRemoteStateConsumers makes the list exactly consumerIDs.
func (s *Service) ReplaceRemoteStateConsumers(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, consumerIDs []string) error {
	w, consumers, err := s.sharingForWrite(ctx, tx, p, workspaceID, consumerIDs)
	if err != nil {
		return err
	}
	evidence, err := replaceConsumers(ctx, tx, w, consumers, p.ID)
	if err != nil || evidence == nil {
		return err
	}
	return recordSharingChange(ctx, tx, p, w, evidence)
}

// ReplaceSharing sets both the global switch and the list at once (the
// list is kept while global is set) and returns the result.
func (s *Service) ReplaceSharing(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, global bool, consumerIDs []string) (Sharing, error) {
	w, consumers, err := s.sharingForWrite(ctx, tx, p, workspaceID, consumerIDs)
	if err != nil {
		return Sharing{}, err
	}
	evidence, err := replaceConsumers(ctx, tx, w, consumers, p.ID)
	if err != nil {
		return Sharing{}, err
	}
	if w.GlobalRemoteState != global {
		w.GlobalRemoteState, w.UpdatedAt = global, s.stamp()
		if err := setGlobalRemoteState(ctx, tx, w); err != nil {
			return Sharing{}, err
		}
		if evidence == nil {
			evidence = map[string]any{}
		}
		evidence["global"] = global
	}
	if evidence != nil {
		if err := recordSharingChange(ctx, tx, p, w, evidence); err != nil {
			return Sharing{}, err
		}
	}
	return s.sharingOf(ctx, tx, p, w)
}

// sharingForWrite locks a workspace whose sharing the principal manages
// (workspace:admin there) and loads the named consumers: each must be
// another workspace the principal reads, else the request is not found
// (or, for the workspace itself, invalid).
func (s *Service) sharingForWrite(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, consumerIDs []string) (Workspace, []Workspace, error) {
	w, err := visibleWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceAdmin, true)
	if err != nil {
		return Workspace{}, nil, err
	}
	ids := slices.Compact(slices.Sorted(slices.Values(consumerIDs)))
	if slices.Contains(ids, w.ID) {
		return Workspace{}, nil, ErrSelfConsumer
	}
	consumers, err := workspacesByID(ctx, tx, w.OrganizationID, ids)
	if err != nil {
		return Workspace{}, nil, err
	}
	if len(consumers) != len(ids) {
		return Workspace{}, nil, fault.ErrNotFound
	}
	for _, c := range consumers {
		if !p.CanReadWorkspace(c.ID, c.ProjectID) {
			return Workspace{}, nil, fault.ErrNotFound
		}
	}
	return w, consumers, nil
}

// replaceConsumers makes the list exactly consumers and returns what
// changed as audit evidence, nil when nothing did.
func replaceConsumers(ctx context.Context, tx *sqlx.Tx, w Workspace, consumers []Workspace, createdBy string) (map[string]any, error) {
	listed, err := listConsumers(ctx, tx, w.OrganizationID, w.ID)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, c := range consumers {
		keep[c.ID] = true
	}
	var gone []Workspace
	for _, c := range listed {
		if !keep[c.ID] {
			gone = append(gone, c)
		}
	}
	removed, err := deleteConsumers(ctx, tx, w, gone)
	if err != nil {
		return nil, err
	}
	added, err := insertConsumers(ctx, tx, w, consumers, createdBy)
	if err != nil {
		return nil, err
	}
	if len(added) == 0 && len(removed) == 0 {
		return nil, nil
	}
	return map[string]any{"added": added, "removed": removed}, nil
}

func recordSharingChange(ctx context.Context, tx *sqlx.Tx, p access.Principal, w Workspace, evidence map[string]any) error {
	return audit.Record(ctx, tx, p, "workspace.remote_state_sharing_changed", "workspace", w.ID, evidence)
}
