package v1_test

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

type credProfile struct {
	ID               string            `json:"id"`
	Provider         string            `json:"provider"`
	State            string            `json:"state"`
	CurrentVersionID *string           `json:"current_version_id"`
	Subjects         map[string]string `json:"subjects"`
	CurrentVersion   *credVersion      `json:"current_version"`
}

type credVersion struct {
	ID               string          `json:"id"`
	Number           int             `json:"number"`
	Provider         string          `json:"provider"`
	Audience         string          `json:"audience"`
	Phase            string          `json:"phase"`
	Configuration    *map[string]any `json:"configuration"`
	EnvironmentNames []string        `json:"environment_names"`
	Verified         bool            `json:"verified"`
	Disabled         bool            `json:"disabled"`
}

func newCredentialProfile(t *testing.T, u *apitest.User, workspaceID, provider string) credProfile {
	t.Helper()
	var p credProfile
	u.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/credential-profiles", map[string]any{"provider": provider}).
		MustStatus(t, http.StatusCreated).Data(t, &p)
	return p
}

func TestGenericSecretIsWriteOnly(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Secretive")
	w := newWorkspace(t, u, newProject(t, u, "P"), "vault")
	const canary = "canary-c7e1-do-not-leak"
	var responses []*apitest.Response
	record := func(r *apitest.Response) *apitest.Response { responses = append(responses, r); return r }

	p := newCredentialProfile(t, u, w.ID, "generic_secret")
	if p.State != "draft" || p.CurrentVersionID != nil {
		t.Fatalf("new profile %+v", p)
	}
	var v credVersion
	record(u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{
		"phase": "plan_and_apply", "configuration": map[string]any{"environment": map[string]string{"TF_VAR_db_password": canary, "API_TOKEN": "x"}},
	})).MustStatus(t, http.StatusCreated).Data(t, &v)
	if v.Provider != "generic_secret" || v.Audience != "cairn:generic-secret" || v.Configuration != nil ||
		strings.Join(v.EnvironmentNames, ",") != "API_TOKEN,TF_VAR_db_password" || v.Verified || v.Number != 1 {
		t.Fatalf("version %+v", v)
	}
	record(u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", nil)).
		MustStatus(t, http.StatusOK).Data(t, &p)
	if p.State != "active" || p.CurrentVersionID == nil || *p.CurrentVersionID != v.ID || !p.CurrentVersion.Verified {
		t.Fatalf("verified profile %+v", p)
	}
	record(u.Get("/v1/credential-profiles/"+p.ID)).MustStatus(t, http.StatusOK)
	record(u.Get("/v1/credential-profiles/"+p.ID+"/versions")).MustStatus(t, http.StatusOK)
	record(u.Get("/v1/credential-profiles/"+p.ID+"/versions/"+v.ID)).MustStatus(t, http.StatusOK)
	record(u.Get("/v1/workspaces/"+w.ID+"/credential-profiles")).MustStatus(t, http.StatusOK)
	record(u.Get("/v1/audit-events")).MustStatus(t, http.StatusOK)

	for _, r := range responses {
		if strings.Contains(string(r.Body), canary) {
			t.Fatalf("a response carries the secret: %s", r.Body)
		}
	}
	if !strings.Contains(string(responses[len(responses)-1].Body), "credential_profile_version.verified") {
		t.Fatal("no audit event for the verification")
	}
	if strings.Contains(env.Logs.String(), canary) {
		t.Fatal("the logs carry the secret")
	}
	if table := tableHolding(t, env.DB, canary); table != "" {
		t.Fatalf("table %s holds the secret in clear", table)
	}
}

// tableHolding returns a table whose rows, as text (bytea as hex), hold
// secret or its hex spelling; "" when none does.
func tableHolding(t *testing.T, conn *sqlx.DB, secret string) string {
	t.Helper()
	var tables []string
	if err := conn.Select(&tables, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 20 {
		t.Fatalf("only %d tables to search", len(tables))
	}
	for _, table := range tables {
		var text string
		if err := conn.Get(&text, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+pq.QuoteIdentifier(table)+` t`); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, secret) || strings.Contains(text, hex.EncodeToString([]byte(secret))) {
			return table
		}
	}
	return ""
}

func TestCredentialVersionRefusals(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Refuser")
	w := newWorkspace(t, u, newProject(t, u, "P"), "w")
	generic := newCredentialProfile(t, u, w.ID, "generic_secret")
	aws := newCredentialProfile(t, u, w.ID, "aws")
	path := func(p credProfile) string { return "/v1/credential-profiles/" + p.ID + "/versions" }
	env1 := func(k, v string) map[string]any {
		return map[string]any{"phase": "plan_and_apply", "configuration": map[string]any{"environment": map[string]string{k: v}}}
	}
	for name, tc := range map[string]struct {
		profile credProfile
		body    any
		status  int
		code    string
	}{
		"nul value":            {generic, env1("API_TOKEN", "a\x00b"), http.StatusBadRequest, "CREDENTIAL_SECRET_VALUE_INVALID"},
		"generic speculative":  {generic, map[string]any{"phase": "speculative_plan", "configuration": map[string]any{"environment": map[string]string{"A": "b"}}}, http.StatusBadRequest, "CREDENTIAL_PROFILE_PHASE_UNSUPPORTED"},
		"standalone plan":      {aws, map[string]any{"phase": "plan", "configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/deploy"}}, http.StatusBadRequest, "CREDENTIAL_PROFILE_PHASE_UNSUPPORTED"},
		"standalone apply":     {aws, map[string]any{"phase": "apply", "configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/deploy"}}, http.StatusBadRequest, "CREDENTIAL_PROFILE_PHASE_UNSUPPORTED"},
		"generic apply":        {generic, map[string]any{"phase": "apply", "configuration": map[string]any{"environment": map[string]string{"A": "b"}}}, http.StatusBadRequest, "CREDENTIAL_PROFILE_PHASE_UNSUPPORTED"},
		"runner-owned name":    {generic, env1("PATH", "/tmp"), http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"cairn name":           {generic, env1("CAIRN_RUN_TOKEN", "x"), http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"tf name":              {generic, env1("TF_LOG", "trace"), http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"federation name":      {generic, env1("AWS_ROLE_ARN", "x"), http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"unsafe name":          {generic, env1("A-B", "x"), http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"empty map":            {generic, map[string]any{"phase": "plan_and_apply", "configuration": map[string]any{"environment": map[string]string{}}}, http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"oversize map":         {generic, env1("BIG", strings.Repeat("x", 64<<10)), http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
		"bad role":             {aws, map[string]any{"phase": "plan_and_apply", "configuration": map[string]string{"role_arn": "deploy"}}, http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
		"aws with generic map": {aws, env1("A", "b"), http.StatusBadRequest, "CREDENTIAL_CONFIGURATION_INVALID"},
	} {
		resp := u.Mutate(http.MethodPost, path(tc.profile), tc.body)
		if resp.Status != tc.status || resp.Code() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, resp.Status, resp.Body, tc.status, tc.code)
		}
	}
	// A duplicated name is refused, not silently resolved to the last.
	resp := u.Do(apitest.Request{Method: http.MethodPost, Path: path(generic), Header: map[string]string{"Idempotency-Key": apitest.NewKey()},
		Body: []byte(`{"phase":"plan_and_apply","configuration":{"environment":{"A":"1","A":"2"}}}`)})
	if resp.Status != http.StatusBadRequest || resp.Code() != "CREDENTIAL_CONFIGURATION_INVALID" {
		t.Errorf("duplicated name: %d %s", resp.Status, resp.Body)
	}
	var n int
	if err := env.DB.Get(&n, `SELECT count(*) FROM credential_profile_versions`); err != nil || n != 0 {
		t.Fatalf("refused versions stored: %d %v", n, err)
	}
	// A federation takes speculative_plan as well as plan_and_apply
	// (SPEC §2 Credential profile phases).
	for _, phase := range []string{"speculative_plan", "plan_and_apply"} {
		var v struct {
			ID, Object, Phase, Provider string
		}
		u.Mutate(http.MethodPost, path(aws), map[string]any{"phase": phase,
			"configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/deploy"}}).MustStatus(t, http.StatusCreated).Data(t, &v)
		if v.ID == "" || v.Phase != phase || v.Provider != "aws" {
			t.Fatalf("federation %s version %+v", phase, v)
		}
	}
}

func TestGenericSecretWithoutKeysIsRefusedAndNothingStored(t *testing.T) {
	t.Parallel()
	for name, strip := range map[string]func(*apitest.Settings){
		"no hmac key": func(s *apitest.Settings) { s.Config.IdempotencyHMACKey = "" },
		"weak hmac key": func(s *apitest.Settings) {
			s.Config.IdempotencyHMACKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
		},
		"no master key": func(s *apitest.Settings) { s.Config.MasterKey = "" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, url := dbtest.NewURL(t)
			env := apitest.Start(t, conn, url, strip)
			u := env.WithOrganization("Keyless")
			w := newWorkspace(t, u, newProject(t, u, "P"), "w")
			p := newCredentialProfile(t, u, w.ID, "generic_secret")
			resp := u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{
				"phase": "plan_and_apply", "configuration": map[string]any{"environment": map[string]string{"A": "secret"}}})
			if resp.Status != http.StatusServiceUnavailable {
				t.Fatalf("generic secret = %d %s", resp.Status, resp.Body)
			}
			var n int
			if err := env.DB.Get(&n, `SELECT count(*) FROM credential_profile_versions`); err != nil || n != 0 {
				t.Fatalf("versions stored: %d %v", n, err)
			}
		})
	}
}

func TestCredentialLifecycleConflictsAndTenancy(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Owner")
	w := newWorkspace(t, u, newProject(t, u, "P"), "w")
	p := newCredentialProfile(t, u, w.ID, "aws")
	var v credVersion
	u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{"phase": "plan_and_apply",
		"configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/deploy"}}).MustStatus(t, http.StatusCreated).Data(t, &v)
	if v.Audience != "sts.amazonaws.com" || v.Configuration == nil || (*v.Configuration)["role_arn"] != "arn:aws:iam::123456789012:role/deploy" {
		t.Fatalf("aws version %+v", v)
	}
	u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", nil).MustStatus(t, http.StatusOK).Data(t, &p)
	if len(p.Subjects) != 3 || !strings.HasSuffix(p.Subjects["plan"], ":run_phase:plan") || len(p.Subjects["speculative_plan"]) > 127 {
		t.Fatalf("subjects %+v", p.Subjects)
	}

	// Another organization's member sees 404 everywhere, reading or writing.
	other := env.WithOrganization("Other")
	for _, r := range []*apitest.Response{
		other.Get("/v1/credential-profiles/" + p.ID),
		other.Get("/v1/credential-profiles/" + p.ID + "/versions"),
		other.Get("/v1/credential-profiles/" + p.ID + "/versions/" + v.ID),
		other.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/actions/archive", map[string]any{}),
		other.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke", map[string]any{}),
		other.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{"phase": "plan_and_apply",
			"configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/x"}}),
	} {
		if r.Status != http.StatusNotFound {
			t.Fatalf("cross-tenant = %d %s", r.Status, r.Body)
		}
	}
	// A version of another profile is 404, like a missing one.
	q := newCredentialProfile(t, u, w.ID, "generic_secret")
	u.Get("/v1/credential-profiles/"+q.ID+"/versions/"+v.ID).MustStatus(t, http.StatusNotFound)
	u.Mutate(http.MethodPost, "/v1/credential-profiles/"+q.ID+"/versions/"+v.ID+"/actions/revoke", map[string]any{}).MustStatus(t, http.StatusNotFound)

	// A writer lacks credential:write.
	writer := env.SignUp("Writer")
	env.Join(u, writer, "writer")
	writer.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke", map[string]any{}).MustStatus(t, http.StatusForbidden)

	// Actions take the exact empty object.
	resp := u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke", map[string]any{"force": true})
	if resp.Status != http.StatusUnprocessableEntity && resp.Status != http.StatusBadRequest {
		t.Fatalf("revoke with fields = %d %s", resp.Status, resp.Body)
	}

	u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke", map[string]any{}).MustStatus(t, http.StatusOK)
	resp = u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke", map[string]any{})
	if resp.Status != http.StatusConflict || resp.Code() != "CREDENTIAL_PROFILE_VERSION_DISABLED" {
		t.Fatalf("revoke twice = %d %s", resp.Status, resp.Body)
	}
	u.Get("/v1/credential-profiles/"+p.ID).MustStatus(t, http.StatusOK).Data(t, &p)
	if p.CurrentVersionID != nil {
		t.Fatalf("revoked version still current: %+v", p)
	}
	u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/actions/archive", map[string]any{}).MustStatus(t, http.StatusOK)
	resp = u.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/actions/archive", map[string]any{})
	if resp.Status != http.StatusConflict || resp.Code() != "CREDENTIAL_PROFILE_ARCHIVED" {
		t.Fatalf("archive twice = %d %s", resp.Status, resp.Body)
	}
	audit := string(u.Get("/v1/audit-events").MustStatus(t, http.StatusOK).Body)
	for _, want := range []string{"credential_profile.archived", "credential_profile_version.revoked"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("audit lacks %s", want)
		}
	}
}
