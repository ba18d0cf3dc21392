package policy_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/policytest"
)

const alwaysPass = "package cairn.v1\n\ndecision := {\"findings\": []}\n"

// TestDetachingAnotherTenantsAttachmentIsRejected (SPEC §3 Attachment:
// a cross-tenant detach is not treated as active and is rejected): another
// organization cannot detach an attachment through any path, whether it
// names the owner's workspace or set or its own. Each is 404,
// and the attachment stays active with no detach audited, until its
// owner detaches it. The owner cannot detach an organization attachment
// through a workspace path either, nor another tenant's attachment.
func TestDetachingAnotherTenantsAttachmentIsRejected(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	a := policytest.New(t, env, "tenant-a")
	b := policytest.New(t, env, "tenant-b")
	va := a.Publish(t, "tenant-a-set", map[string]string{"policy.rego": alwaysPass})
	vb := b.Publish(t, "tenant-b-set", map[string]string{"policy.rego": alwaysPass})
	var inWorkspace, inOrganization, own struct{ ID string }
	a.User.Mutate(http.MethodPost, "/v1/workspaces/"+a.WorkspaceID+"/policy-attachments", map[string]string{
		"policy_set_id": va.SetID, "policy_version_id": va.ID, "enforcement_mode": policy.ModeHardMandatory}).
		MustStatus(t, http.StatusCreated).Data(t, &inWorkspace)
	a.User.Mutate(http.MethodPost, "/v1/policy-sets/"+va.SetID+"/attachments", map[string]string{
		"policy_version_id": va.ID, "enforcement_mode": policy.ModeAdvisory, "scope": policy.ScopeOrganization}).
		MustStatus(t, http.StatusCreated).Data(t, &inOrganization)
	b.User.Mutate(http.MethodPost, "/v1/workspaces/"+b.WorkspaceID+"/policy-attachments", map[string]string{
		"policy_set_id": vb.SetID, "policy_version_id": vb.ID, "enforcement_mode": policy.ModeAdvisory}).
		MustStatus(t, http.StatusCreated).Data(t, &own)

	status := func(id string) string {
		t.Helper()
		var s string
		if err := env.DB.Get(&s, `SELECT status FROM policy_attachments WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return s
	}
	refused := map[string]struct {
		u    *apitest.User
		path string
	}{
		"another tenant, the owner's set":                           {b.User, "/v1/policy-sets/" + va.SetID + "/attachments/" + inWorkspace.ID},
		"another tenant, its own set":                               {b.User, "/v1/policy-sets/" + vb.SetID + "/attachments/" + inWorkspace.ID},
		"another tenant, the owner's workspace":                     {b.User, "/v1/workspaces/" + a.WorkspaceID + "/policy-attachments/" + inWorkspace.ID},
		"another tenant, its own workspace":                         {b.User, "/v1/workspaces/" + b.WorkspaceID + "/policy-attachments/" + inWorkspace.ID},
		"another tenant, an organization attachment":                {b.User, "/v1/policy-sets/" + va.SetID + "/attachments/" + inOrganization.ID},
		"another tenant, through its own workspace":                 {b.User, "/v1/workspaces/" + b.WorkspaceID + "/policy-attachments/" + inOrganization.ID},
		"the owner, an organization attachment through a workspace": {a.User, "/v1/workspaces/" + a.WorkspaceID + "/policy-attachments/" + inOrganization.ID},
		"the owner, another tenant's attachment":                    {a.User, "/v1/workspaces/" + a.WorkspaceID + "/policy-attachments/" + own.ID},
		"the owner, another tenant's set":                           {a.User, "/v1/policy-sets/" + vb.SetID + "/attachments/" + own.ID},
	}
	for name, c := range refused {
		if resp := c.u.Mutate(http.MethodDelete, c.path, nil); resp.Status != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", name, resp.Status, resp.Body)
		}
	}
	for _, id := range []string{inWorkspace.ID, inOrganization.ID, own.ID} {
		if s := status(id); s != policy.AttachmentActive {
			t.Fatalf("attachment %s is %s after refused detaches", id, s)
		}
	}
	var audited int
	if err := env.DB.Get(&audited, `SELECT count(*) FROM audit_events WHERE action = 'policy_attachment.detached'`); err != nil || audited != 0 {
		t.Fatalf("%d detaches audited (%v)", audited, err)
	}
	a.User.Mutate(http.MethodDelete, "/v1/workspaces/"+a.WorkspaceID+"/policy-attachments/"+inWorkspace.ID, nil).MustStatus(t, http.StatusOK)
	a.User.Mutate(http.MethodDelete, "/v1/policy-sets/"+va.SetID+"/attachments/"+inOrganization.ID, nil).MustStatus(t, http.StatusOK)
	if status(inWorkspace.ID) != policy.AttachmentDetached || status(inOrganization.ID) != policy.AttachmentDetached || status(own.ID) != policy.AttachmentActive {
		t.Fatal("the owners' detaches")
	}
}
