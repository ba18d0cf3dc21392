package v1_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/credential"
)

// TestCredentialProfileDocumentLimit: every credential-profile mutation
// takes a document of up to 100,000 bytes (SPEC §8) and refuses one byte
// more with 413 PAYLOAD_TOO_LARGE before anything is stored. The documents
// are valid JSON padded with whitespace, so only their size differs.
func TestCredentialProfileDocumentLimit(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Limits")
	w := newWorkspace(t, u, newProject(t, u, "P"), "w")
	padded := func(doc string, size int) []byte {
		return []byte(doc + strings.Repeat(" ", size-len(doc)))
	}
	post := func(path, doc string, size int) *apitest.Response {
		return u.Do(apitest.Request{Method: http.MethodPost, Path: path, Body: padded(doc, size),
			Header: map[string]string{"Idempotency-Key": apitest.NewKey(), "Content-Type": "application/json"}})
	}
	profiles := "/v1/workspaces/" + w.ID + "/credential-profiles"
	if r := post(profiles, `{"provider":"generic_secret","name":"over"}`, credential.DocumentLimit+1); r.Status != http.StatusRequestEntityTooLarge || r.Code() != "PAYLOAD_TOO_LARGE" {
		t.Errorf("profile document of %d bytes: %d %s", credential.DocumentLimit+1, r.Status, r.Body)
	}
	r := post(profiles, `{"provider":"generic_secret","name":"at-limit"}`, credential.DocumentLimit)
	var p credProfile
	r.MustStatus(t, http.StatusCreated).Data(t, &p)

	versions := "/v1/credential-profiles/" + p.ID + "/versions"
	const version = `{"phase":"plan_and_apply","configuration":{"environment":{"API_TOKEN":"x"}}}`
	if r := post(versions, version, credential.DocumentLimit+1); r.Status != http.StatusRequestEntityTooLarge || r.Code() != "PAYLOAD_TOO_LARGE" {
		t.Errorf("version document of %d bytes: %d %s", credential.DocumentLimit+1, r.Status, r.Body)
	}
	var n int
	if err := env.DB.Get(&n, `SELECT count(*) FROM credential_profile_versions`); err != nil || n != 0 {
		t.Fatalf("an oversized version was stored: %d %v", n, err)
	}
	post(versions, version, credential.DocumentLimit).MustStatus(t, http.StatusCreated)
	if err := env.DB.Get(&n, `SELECT count(*) FROM credential_profiles WHERE name = 'over'`); err != nil || n != 0 {
		t.Fatalf("an oversized profile was stored: %d %v", n, err)
	}
}
