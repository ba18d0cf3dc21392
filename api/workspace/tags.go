package workspace

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/id"
)

// Tag is a name of the organization's own that workspaces are bound to.
type Tag struct {
	ID   string `db:"id"`
	Name string `db:"name"`
}

// TagRef names a tag by ID or by name; an ID wins when both are given.
type TagRef struct {
	ID   string
	Name string
}

// tagName is the rule for tag names (HCP Terraform's characters).
var tagName = regexp.MustCompile(`^[A-Za-z0-9:_-]{1,255}$`)

// AddTags binds tags to a workspace, creating the named ones the
// organization does not have yet; a tag already bound stays bound. An ID
// the organization does not hold is not found. Needs workspace:write.
func (s *Service) AddTags(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, refs []TagRef) error {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceWrite)
	if err != nil {
		return err
	}
	var ids []string
	for _, r := range refs {
		tagID := r.ID
		if tagID == "" {
			if tagID, err = s.tagNamed(ctx, tx, w.OrganizationID, r.Name); err != nil {
				return err
			}
		}
		ids = append(ids, tagID)
	}
	var bound []string
	if err := tx.SelectContext(ctx, &bound, `
		INSERT INTO workspace_tag_bindings (workspace_id, tag_id, created_at)
		SELECT $2, t.id, $4 FROM workspace_tags t WHERE t.organization_id = $1 AND t.id = ANY($3::text[])
		ON CONFLICT DO NOTHING RETURNING tag_id`, w.OrganizationID, w.ID, pq.Array(ids), s.stamp()); err != nil {
		return fmt.Errorf("binding tags: %w", err)
	}
	var held int
	if err := tx.GetContext(ctx, &held, `SELECT count(*) FROM workspace_tags WHERE organization_id = $1 AND id = ANY($2::text[])`,
		w.OrganizationID, pq.Array(ids)); err != nil {
		return fmt.Errorf("reading tags: %w", err)
	}
	if held != len(uniq(ids)) {
		return fmt.Errorf("tag: %w", ErrTagNotFound)
	}
	if len(bound) == 0 {
		return nil
	}
	return audit.Record(ctx, tx, p, "workspace.tags_added", "workspace", w.ID, map[string]any{"tag_ids": bound})
}

// tagNamed returns the organization's tag of that name, created if new.
func (s *Service) tagNamed(ctx context.Context, tx *sqlx.Tx, organizationID, name string) (string, error) {
	if !tagName.MatchString(name) {
		return "", fmt.Errorf("%w: a tag name is 1-255 letters, digits, '-', '_' or ':'", ErrInvalid)
	}
	var tagID string
	err := tx.GetContext(ctx, &tagID, `
		INSERT INTO workspace_tags (id, organization_id, name, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (organization_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id`,
		id.New("tag"), organizationID, name, s.stamp())
	if err != nil {
		return "", fmt.Errorf("creating tag: %w", err)
	}
	return tagID, nil
}

// RemoveTags unbinds tags from a workspace; a tag it does not hold (or
// the organization does not have) is no error. Needs workspace:write.
func (s *Service) RemoveTags(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, refs []TagRef) error {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceWrite)
	if err != nil {
		return err
	}
	var ids, names []string
	for _, r := range refs {
		if r.ID != "" {
			ids = append(ids, r.ID)
		} else {
			names = append(names, r.Name)
		}
	}
	var removed []string
	if err := tx.SelectContext(ctx, &removed, `
		DELETE FROM workspace_tag_bindings b USING workspace_tags t
		WHERE b.tag_id = t.id AND b.workspace_id = $2 AND t.organization_id = $1
			AND (t.id = ANY($3::text[]) OR t.name = ANY($4::text[]))
		RETURNING t.id`, w.OrganizationID, w.ID, pq.Array(ids), pq.Array(names)); err != nil {
		return fmt.Errorf("unbinding tags: %w", err)
	}
	if len(removed) == 0 {
		return nil
	}
	return audit.Record(ctx, tx, p, "workspace.tags_removed", "workspace", w.ID, map[string]any{"tag_ids": removed})
}

// Tags lists a workspace's tags by name.
func (s *Service) Tags(ctx context.Context, p access.Principal, workspaceID string) ([]Tag, error) {
	w, err := visibleWorkspace(ctx, s.db, p, workspaceID, access.PermWorkspaceRead, false)
	if err != nil {
		return nil, err
	}
	names, err := TagsOf(ctx, s.db, w.OrganizationID, []string{w.ID})
	if err != nil {
		return nil, err
	}
	return names[w.ID], nil
}

// TagsOf reads the tags of the organization's workspaces ids, each list by
// name; a workspace without tags has none in the map.
func TagsOf(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) (map[string][]Tag, error) {
	var rows []struct {
		WorkspaceID string `db:"workspace_id"`
		Tag
	}
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT b.workspace_id, t.id, t.name FROM workspace_tag_bindings b JOIN workspace_tags t ON t.id = b.tag_id
		WHERE t.organization_id = $1 AND b.workspace_id = ANY($2::text[]) ORDER BY t.name`,
		organizationID, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("reading workspace tags: %w", err)
	}
	out := map[string][]Tag{}
	for _, r := range rows {
		out[r.WorkspaceID] = append(out[r.WorkspaceID], r.Tag)
	}
	return out, nil
}

func uniq(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
