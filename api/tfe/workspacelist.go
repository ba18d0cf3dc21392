package tfe

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

// The organization's workspace list and the workspace tags, as go-tfe's
// Workspaces.List, ListTags, AddTags and RemoveTags call them.

func (s *server) registerWorkspaceList(r fiber.Router) {
	r.Get("/organizations/:org/workspaces", s.guard(s.byOrganization, s.listWorkspaces))
	r.Get("/workspaces/:id/relationships/tags", s.guard(s.byWorkspaceID, s.listWorkspaceTags))
	r.Post("/workspaces/:id/relationships/tags", s.guard(s.byWorkspaceID, s.addWorkspaceTags))
	r.Delete("/workspaces/:id/relationships/tags", s.guard(s.byWorkspaceID, s.removeWorkspaceTags))
}

// factsReads bounds the workspaces whose facts one list reads at once.
const factsReads = 8

// listWorkspaces lists the workspaces the principal can read: search[name]
// (part of the name), search[wildcard-name] ('*' patterns),
// search[tags] and search[exclude-tags] (comma-separated),
// filter[project][id], filter[current-run][status], sort by name or
// current-run.created-at ('-' reverses; workspaces without a current run
// last), paging and include=organization,current_run,current-state-version.
func (s *server) listWorkspaces(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	workspaces, err := s.Workspaces.SearchWorkspaces(ctx, p, workspace.Search{
		Name: c.Query("search[name]"), Wildcard: c.Query("search[wildcard-name]"),
		Tags: commaList(c.Query("search[tags]")), ExcludeTags: commaList(c.Query("search[exclude-tags]")),
		ProjectID: c.Query("filter[project][id]"),
	})
	if err != nil {
		return s.writeError(c, err)
	}
	sort := c.Query("sort", "name")
	status := c.Query("filter[current-run][status]")
	switch strings.TrimPrefix(sort, "-") {
	case "name":
		if sort == "-name" {
			slices.Reverse(workspaces)
		}
	case "current-run.created-at":
	default:
		return s.writeError(c, errInvalidDocument)
	}
	if status != "" || strings.HasSuffix(sort, "current-run.created-at") {
		if workspaces, err = s.byCurrentRun(ctx, p, workspaces, status, sort); err != nil {
			return s.writeError(c, err)
		}
	}
	page, meta := pageOf(c, workspaces)
	facts := make([]workspaceFacts, len(page))
	var tags map[string][]workspace.Tag
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(factsReads)
	g.Go(func() (err error) {
		tags, err = workspace.TagsOf(gctx, s.DB, o.OrganizationID, workspaceIDs(page))
		return err
	})
	for i, w := range page {
		g.Go(func() error {
			inner, ictx := errgroup.WithContext(gctx)
			s.readWorkspaceFacts(ictx, inner, p, w.OrganizationID, w.ID, &facts[i])
			return inner.Wait()
		})
	}
	if err := g.Wait(); err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, len(page))
	for i, w := range page {
		facts[i].tags = tags[w.ID]
		data[i] = workspaceRepresentation(p, o, w, facts[i])
	}
	included, err := s.listIncluded(c, p, o, facts)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeWithIncluded(c, http.StatusOK, data, included, meta)
}

// byCurrentRun keeps the workspaces whose current run (as the principal
// may see it) has the protocol status, when one is given, and orders them
// by their current run's creation when sort asks.
func (s *server) byCurrentRun(ctx context.Context, p access.Principal, ws []workspace.Workspace, status, sort string) ([]workspace.Workspace, error) {
	current := make([]*run.Run, len(ws))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(factsReads)
	for i, w := range ws {
		if !p.PermissionsIn(w.ID, w.ProjectID).Has(access.PermRunRead) {
			continue
		}
		g.Go(func() (err error) {
			current[i], err = s.Runs.CurrentRun(gctx, w.OrganizationID, w.ID)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	type entry struct {
		w   workspace.Workspace
		run *run.Run
	}
	now := time.Now()
	var kept []entry
	for i, w := range ws {
		if status == "" || (current[i] != nil && runStatus(*current[i], now) == status) {
			kept = append(kept, entry{w, current[i]})
		}
	}
	if strings.HasSuffix(sort, "current-run.created-at") {
		desc := strings.HasPrefix(sort, "-")
		slices.SortStableFunc(kept, func(a, b entry) int {
			switch {
			case a.run == nil || b.run == nil:
				// Without a current run last, either way.
				return cmp.Compare(boolRank(a.run == nil), boolRank(b.run == nil))
			case desc:
				return b.run.CreatedAt.Compare(a.run.CreatedAt)
			default:
				return a.run.CreatedAt.Compare(b.run.CreatedAt)
			}
		})
	}
	out := make([]workspace.Workspace, len(kept))
	for i, e := range kept {
		out[i] = e.w
	}
	return out, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listIncluded reads what a workspace list includes: the organization,
// and each listed workspace's current run and current state version where
// its facts show the principal may see them.
func (s *server) listIncluded(c *fiber.Ctx, p access.Principal, o owner, facts []workspaceFacts) ([]resource, error) {
	ctx := c.UserContext()
	var included []resource
	if includes(c, "organization") {
		org, err := s.Identity.OrganizationByID(ctx, o.OrganizationID)
		if err != nil {
			return nil, err
		}
		included = append(included, organizationResource(p, org))
	}
	for _, f := range facts {
		if f.currentRun != "" && includes(c, "current_run") {
			r, err := s.Runs.GetRun(ctx, p, f.currentRun)
			if err != nil {
				return nil, err
			}
			included = append(included, s.runResource(r, p, []ref{}))
		}
		if f.currentSV != "" && includes(c, "current-state-version") {
			v, err := s.State.Get(ctx, p, f.currentSV)
			if err != nil {
				return nil, err
			}
			included = append(included, s.stateVersionResource(v, nil))
		}
	}
	return included, nil
}

func workspaceIDs(ws []workspace.Workspace) []string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	return ids
}

// commaList splits a comma-separated query value, dropping empty items.
func commaList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func tagResource(t workspace.Tag) resource {
	return resource{ID: t.ID, Type: "tags", Attributes: map[string]any{"name": t.Name}}
}

func (s *server) listWorkspaceTags(c *fiber.Ctx, p access.Principal, o owner) error {
	tags, err := s.Workspaces.Tags(c.UserContext(), p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	page, meta := pageOf(c, tags)
	data := make([]resource, len(page))
	for i, t := range page {
		data[i] = tagResource(t)
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}

// tagRefs reads a tags relationship document: each tag by ID, or by name.
func tagRefs(c *fiber.Ctx) ([]workspace.TagRef, error) {
	var doc struct {
		Data []struct {
			Type       string `json:"type"`
			ID         string `json:"id"`
			Attributes struct {
				Name string `json:"name"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return nil, err
	}
	if len(doc.Data) == 0 {
		return nil, errInvalidDocument
	}
	refs := make([]workspace.TagRef, len(doc.Data))
	for i, d := range doc.Data {
		if d.Type != "tags" || (d.ID == "" && d.Attributes.Name == "") {
			return nil, errInvalidDocument
		}
		refs[i] = workspace.TagRef{ID: d.ID, Name: d.Attributes.Name}
	}
	return refs, nil
}

func (s *server) addWorkspaceTags(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.changeTags(c, p, o, s.Workspaces.AddTags)
}

func (s *server) removeWorkspaceTags(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.changeTags(c, p, o, s.Workspaces.RemoveTags)
}

func (s *server) changeTags(c *fiber.Ctx, p access.Principal, o owner,
	change func(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, refs []workspace.TagRef) error,
) error {
	refs, err := tagRefs(c)
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	if err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error { return change(ctx, tx, p, o.WorkspaceID, refs) }); err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}
