package v1_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

type sharingBody struct {
	Global    bool `json:"global"`
	Consumers []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"consumers"`
}

func (b sharingBody) names() []string {
	out := []string{}
	for _, c := range b.Consumers {
		out = append(out, c.Name)
	}
	return out
}

// TestRemoteStateSharingOnV1: an admin replaces a workspace's sharing
// (global and the list, by name when read back); a writer may read it but
// not change it; the workspace itself is refused, and a workspace of
// another organization is not found, for the list and the producer alike.
func TestRemoteStateSharingOnV1(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	proj := newProject(t, owner, "P")
	net, app, ops := newWorkspace(t, owner, proj, "net"), newWorkspace(t, owner, proj, "app"), newWorkspace(t, owner, proj, "ops")
	path := "/v1/workspaces/" + net.ID + "/remote-state-sharing"

	var got sharingBody
	owner.Get(path).MustStatus(t, http.StatusOK).Data(t, &got)
	if got.Global || len(got.Consumers) != 0 {
		t.Fatalf("a new workspace shares: %+v", got)
	}
	owner.Mutate(http.MethodPut, path, map[string]any{"global": false, "consumer_ids": []string{ops.ID, app.ID}}).
		MustStatus(t, http.StatusOK).Data(t, &got)
	if got.Global || !slices.Equal(got.names(), []string{"app", "ops"}) {
		t.Errorf("after listing app and ops: %+v", got)
	}
	owner.Mutate(http.MethodPut, path, map[string]any{"global": true, "consumer_ids": []string{app.ID}}).MustStatus(t, http.StatusOK)
	owner.Get(path).MustStatus(t, http.StatusOK).Data(t, &got)
	if !got.Global || !slices.Equal(got.names(), []string{"app"}) {
		t.Errorf("after sharing globally and keeping app: %+v", got)
	}

	writer := env.SignUp("Writer")
	env.Join(owner, writer, "writer")
	writer.Get(path).MustStatus(t, http.StatusOK)
	writer.Mutate(http.MethodPut, path, map[string]any{"global": false, "consumer_ids": []string{}}).MustStatus(t, http.StatusForbidden)
	if resp := owner.Mutate(http.MethodPut, path, map[string]any{"global": false, "consumer_ids": []string{net.ID}}); resp.Status < 400 || resp.Status >= 500 || resp.Status == http.StatusNotFound {
		t.Errorf("listing the workspace itself = %d %s, want a refusal of the input", resp.Status, resp.Body)
	}
	other := env.WithOrganization("Other")
	foreign := newWorkspace(t, other, newProject(t, other, "Q"), "foreign")
	owner.Mutate(http.MethodPut, path, map[string]any{"global": false, "consumer_ids": []string{foreign.ID}}).MustStatus(t, http.StatusNotFound)
	other.Get(path).MustStatus(t, http.StatusNotFound)
	owner.Get(path).MustStatus(t, http.StatusOK).Data(t, &got)
	if !got.Global || !slices.Equal(got.names(), []string{"app"}) {
		t.Errorf("after the refusals: %+v", got)
	}
}
