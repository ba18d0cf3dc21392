package trigger

import (
	"time"
)

// MaxSources is how many source workspaces one workspace may have (HCP's
// limit).
const MaxSources = 20

// Trigger makes WorkspaceID (the destination) run whenever a run of
// SourceWorkspaceID applies. Names and projects are read with it.
type Trigger struct {
	ID                 string    `db:"id"`
	OrganizationID     string    `db:"organization_id"`
	WorkspaceID        string    `db:"workspace_id"`
	WorkspaceName      string    `db:"workspace_name"`
	WorkspaceCloudName string    `db:"workspace_cloud_name"`
	WorkspaceProjectID string    `db:"workspace_project_id"`
	SourceWorkspaceID  string    `db:"source_workspace_id"`
	SourceName         string    `db:"source_name"`
	SourceCloudName    string    `db:"source_cloud_name"`
	SourceProjectID    string    `db:"source_project_id"`
	CreatedByKind      string    `db:"created_by_kind"`
	CreatedByID        string    `db:"created_by_id"`
	CreatedAt          time.Time `db:"created_at"`
}

// Edge is one trigger as the cycle check sees it: runs flow from Source to
// Destination.
type Edge struct {
	Source      string `db:"source_workspace_id"`
	Destination string `db:"workspace_id"`
}

// CyclePath is the loop a new edge from source to destination would
// close, from source back to source (A, B, …, A), or nil when there is
// none: the destination already reaching the source through edges makes
// one. The path found is a shortest one, and equal-length paths are broken
// by edge order, so the answer is stable.
func CyclePath(edges []Edge, source, destination string) []string {
	if source == destination {
		return []string{source, source}
	}
	next := map[string][]string{}
	for _, e := range edges {
		next[e.Source] = append(next[e.Source], e.Destination)
	}
	// Breadth first from the destination, remembering how each workspace
	// was reached.
	from := map[string]string{destination: ""}
	queue := []string{destination}
	for len(queue) > 0 {
		at := queue[0]
		queue = queue[1:]
		if at == source {
			path := []string{source}
			for w := at; w != ""; w = from[w] {
				path = append(path, w)
			}
			// path is source, source, …, destination: reverse all but
			// the leading source to read source → destination → … → source.
			tail := path[1:]
			for i, j := 0, len(tail)-1; i < j; i, j = i+1, j-1 {
				tail[i], tail[j] = tail[j], tail[i]
			}
			return append([]string{source}, tail...)
		}
		for _, n := range next[at] {
			if _, seen := from[n]; !seen {
				from[n] = at
				queue = append(queue, n)
			}
		}
	}
	return nil
}

// Message is the message of a run a trigger creates.
func Message(sourceRunID, sourceName string) string {
	return "Triggered by run " + sourceRunID + " of workspace " + sourceName
}
