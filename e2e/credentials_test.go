package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jmoiron/sqlx"
)

// workloadIssuerPath is where, under the public URL, the workload-identity
// issuer lives: the root's discovery document is the agents' authorization
// server's.
const workloadIssuerPath = "/workload-identity"

// genericSecretConfig reads a generic secret through TF_VAR_db_password
// into a sensitive variable and outputs only its digest.
const genericSecretConfig = `variable "db_password" {
  type      = string
  sensitive = true
}

resource "terraform_data" "password" {
  input = var.db_password
}

output "password_sha256" {
  value = nonsensitive(sha256(var.db_password))
}
`

type credentialProfile struct {
	ID string `json:"id"`
}

type credentialVersion struct {
	ID string `json:"id"`
}

// credentialProfileWith creates a profile of provider in the workspace
// with one version of configuration, verified and current.
func (s *Stack) credentialProfileWith(t *testing.T, m member, wsID, provider string, configuration any, record func([]byte)) (credentialProfile, credentialVersion) {
	t.Helper()
	var p credentialProfile
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+wsID+"/credential-profiles",
		mustJSON(map[string]string{"provider": provider}), append(m.mutate(uniqueKey("cpr")), "Content-Type", "application/json")...)
	if st != http.StatusCreated {
		t.Fatalf("credential profile: %d %s", st, body)
	}
	record(body)
	unmarshalData(t, body, &p)
	var v credentialVersion
	st, body = call(t, s.Client, http.MethodPost, s.APIURL+"/v1/credential-profiles/"+p.ID+"/versions",
		mustJSON(map[string]any{"phase": "plan_and_apply", "configuration": configuration}),
		append(m.mutate(uniqueKey("cpv")), "Content-Type", "application/json")...)
	if st != http.StatusCreated {
		t.Fatalf("credential version: %d %s", st, body)
	}
	record(body)
	unmarshalData(t, body, &v)
	st, body = call(t, s.Client, http.MethodPost, s.APIURL+"/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", nil,
		m.mutate(uniqueKey("verify"))...)
	if st != http.StatusOK {
		t.Fatalf("verify: %d %s", st, body)
	}
	record(body)
	return p, v
}

func unmarshalData(t *testing.T, body []byte, v any) {
	t.Helper()
	var doc struct{ Data json.RawMessage }
	if err := json.Unmarshal(body, &doc); err != nil || json.Unmarshal(doc.Data, v) != nil {
		t.Fatalf("decoding %s", body)
	}
}

// TestGenericSecretReachesOnlyTheSandbox writes a generic secret as
// TF_VAR_db_password, runs the real tofu CLI through plan, approval and
// apply, and finds the secret's digest in the applied state's output, while
// the secret itself is in no log chunk, API response, audit event, plan
// change or database dump.
func TestGenericSecretReachesOnlyTheSandbox(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "generic")
	wsID := s.createWorkspace(t, m, "generic-secret", "us")
	const canary = "canary-7d41e9-generic-secret"
	var responses [][]byte
	record := func(b []byte) { responses = append(responses, b) }
	s.credentialProfileWith(t, m, wsID, "generic_secret", map[string]any{"environment": map[string]string{"TF_VAR_db_password": canary}}, record)

	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": genericSecretConfig})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval", "errored", "plan_credentials_required"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %+v\n%s", r, s.logsOf(t, m, r.ID))
	}
	_, changes := call(t, s.Client, http.MethodGet, s.APIURL+"/v1/runs/"+r.ID+"/plan-changes", nil, m.cookie()...)
	record(changes)
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	applied := s.waitRun(t, m, r.ID, 90*time.Second, status("applied", "errored", "recovery_required"))
	logs := s.logsOf(t, m, r.ID)
	if applied.Status != "applied" {
		t.Fatalf("apply: %+v\n%s", applied, logs)
	}
	_, _, state := s.currentState(t, m, wsID)
	sum := sha256.Sum256([]byte(canary))
	var doc struct {
		Outputs map[string]struct{ Value string } `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(state), &doc); err != nil || doc.Outputs["password_sha256"].Value != hex.EncodeToString(sum[:]) {
		t.Fatalf("state output %+v, want sha256 of the secret", doc.Outputs)
	}
	for _, path := range []string{"/v1/runs/" + r.ID, "/v1/audit-events?limit=100", "/v1/workspaces/" + wsID + "/credential-profiles"} {
		_, body := call(t, s.Client, http.MethodGet, s.APIURL+path, nil, m.cookie()...)
		record(body)
	}
	record([]byte(logs))
	for _, body := range responses {
		if strings.Contains(string(body), canary) {
			t.Fatalf("the secret reached a response or log: %s", body)
		}
	}
	if strings.Contains(s.Logs(), canary) {
		t.Fatal("the process logs hold the secret")
	}
	dump := withDecodedBytea(dumpDatabase(t, s.DatabaseURL))
	// The applied state holds the secret (terraform_data's input): that
	// is the state's business, sealed at rest; the dump must not.
	for _, form := range [][]byte{[]byte(canary), []byte(hex.EncodeToString([]byte(canary)))} {
		if i := bytes.Index(dump, form); i >= 0 {
			t.Fatalf("the database dump holds the secret: …%q…", excerpt(dump, i))
		}
	}
}

// TestRevokedVersionBlocksAQueuedRun queues a run while the worker is
// stopped, revokes the version it pinned, and starts the worker: the run
// ends plan_credentials_required and no handle was ever redeemed.
func TestRevokedVersionBlocksAQueuedRun(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "revoked")
	wsID := s.createWorkspace(t, m, "revoked-secret", "us")
	p, v := s.credentialProfileWith(t, m, wsID, "generic_secret", map[string]any{"environment": map[string]string{"TF_VAR_db_password": "x"}}, func([]byte) {})
	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": genericSecretConfig})
	s.StopWorker(t, time.Minute)
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/revoke",
		[]byte(`{}`), append(m.mutate(uniqueKey("revoke")), "Content-Type", "application/json")...); st != http.StatusOK {
		t.Fatalf("revoke: %d %s", st, body)
	}
	s.StartWorker(t)
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("plan_credentials_required", "errored", "awaiting_approval"))
	if r.Status != "plan_credentials_required" || r.TerminalReason == nil || *r.TerminalReason != "credential_version_disabled" {
		t.Fatalf("run after the revoke: %+v", r)
	}
	conn := sqlx.MustConnect("postgres", s.DatabaseURL)
	defer conn.Close()
	var handles int
	if err := conn.Get(&handles, `SELECT count(*) FROM credential_handles WHERE run_id = $1`, r.ID); err != nil || handles != 0 {
		t.Fatalf("%d handles issued for the blocked run (%v)", handles, err)
	}
}

// federationConfig prints, from inside the sandboxed apply, each token
// in hex (the log masks the token's own, quoted, base64 and URL-encoded
// spellings; od and tr are in the sandbox's managed base) and the
// variables and files each cloud's SDK reads.
const federationConfig = `resource "terraform_data" "probe" {
  provisioner "local-exec" {
    command = <<-EOT
      echo "AWS_TOKEN_HEX=$(od -An -v -tx1 < "$AWS_WEB_IDENTITY_TOKEN_FILE" | tr -d ' \n')"
      echo "AZURE_TOKEN_HEX=$(od -An -v -tx1 < "$ARM_OIDC_TOKEN_FILE_PATH" | tr -d ' \n')"
      echo "GCP_TOKEN_HEX=$(od -An -v -tx1 < "$(dirname "$GOOGLE_APPLICATION_CREDENTIALS")/gcp-subject-token" | tr -d ' \n')"
      echo "AWS_ROLE_ARN=$AWS_ROLE_ARN"
      echo "ARM_CLIENT_ID=$ARM_CLIENT_ID ARM_TENANT_ID=$ARM_TENANT_ID ARM_USE_OIDC=$ARM_USE_OIDC"
      echo "AZURE_CLIENT_ID=$AZURE_CLIENT_ID AZURE_FEDERATED_TOKEN_FILE_SAME=$([ "$AZURE_FEDERATED_TOKEN_FILE" = "$ARM_OIDC_TOKEN_FILE_PATH" ] && echo yes)"
      echo "GCP_CREDENTIALS_B64=$(base64 -w0 < "$GOOGLE_APPLICATION_CREDENTIALS")"
    EOT
  }
}
`

// TestFederationTokensVerifyWithAStandardOIDCLibrary gives a workspace
// AWS, GCP and Azure federation profiles, runs an apply whose provisioner
// reports what the sandbox received, and verifies each token with
// go-oidc against Cairn's discovery document and JWKS.
func TestFederationTokensVerifyWithAStandardOIDCLibrary(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	rewriteControl(t, s, "e2e: federation on", func(doc map[string]any) {
		doc["federation_providers"] = map[string]any{"aws": true, "gcp": true, "azure": true}
	})
	m := s.newMember(t, "federated")
	wsID := s.createWorkspace(t, m, "federated", "us")
	const (
		roleARN  = "arn:aws:iam::123456789012:role/cairn-deploy"
		wip      = "projects/123456789/locations/global/workloadIdentityPools/cairn-pool/providers/cairn-provider"
		account  = "deployer@example-project.iam.gserviceaccount.com"
		tenantID = "11111111-2222-3333-4444-555555555555"
		clientID = "66666666-7777-8888-9999-000000000000"
	)
	none := func([]byte) {}
	s.credentialProfileWith(t, m, wsID, "aws", map[string]string{"role_arn": roleARN}, none)
	s.credentialProfileWith(t, m, wsID, "gcp", map[string]string{"workload_identity_provider": wip, "service_account": account}, none)
	s.credentialProfileWith(t, m, wsID, "azure", map[string]string{"tenant_id": tenantID, "client_id": clientID}, none)

	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": federationConfig})
	st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval", "errored", "plan_credentials_required"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %+v\n%s", r, s.logsOf(t, m, r.ID))
	}
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	applied := s.waitRun(t, m, r.ID, 90*time.Second, status("applied", "errored", "recovery_required"))
	logs := s.logsOf(t, m, r.ID)
	if applied.Status != "applied" {
		t.Fatalf("apply: %+v\n%s", applied, logs)
	}
	field := func(name string) string {
		// The echoed value, not the command line tofu prints first.
		m := regexp.MustCompile(`\b` + name + `=([^\s$"\\]+)`).FindStringSubmatch(logs)
		if m == nil {
			t.Fatalf("the sandbox did not report %s:\n%s", name, logs)
		}
		return m[1]
	}
	decode := func(name, s string) string {
		raw, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("%s is not hex: %v", name, err)
		}
		return strings.TrimSpace(string(raw))
	}

	ctx := oidc.ClientContext(context.Background(), s.Client)
	provider, err := oidc.NewProvider(ctx, s.APIURL+workloadIssuerPath)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var w struct {
		OrganizationID string `json:"organization_id"`
		ProjectID      string `json:"project_id"`
	}
	s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID, nil, &w, m.cookie()...)
	for name, audience := range map[string]string{
		"AWS_TOKEN_HEX":   "sts.amazonaws.com",
		"AZURE_TOKEN_HEX": "api://AzureADTokenExchange",
		"GCP_TOKEN_HEX":   "//iam.googleapis.com/" + wip,
	} {
		raw := decode(name, field(name))
		if strings.Contains(logs, raw) {
			t.Fatalf("%s: the token itself reached the log", name)
		}
		token, err := provider.VerifierContext(ctx, &oidc.Config{ClientID: audience}).Verify(ctx, raw)
		if err != nil {
			t.Fatalf("%s does not verify: %v", name, err)
		}
		var claims struct {
			Subject     string `json:"sub"`
			JTI         string `json:"jti"`
			RunID       string `json:"run_id"`
			RunPhase    string `json:"run_phase"`
			WorkspaceID string `json:"workspace_id"`
			Initiator   string `json:"run_initiator"`
		}
		if err := token.Claims(&claims); err != nil {
			t.Fatal(err)
		}
		if token.Issuer != s.APIURL+workloadIssuerPath || claims.RunID != r.ID || claims.RunPhase != "apply" || claims.WorkspaceID != wsID ||
			claims.Initiator != "user" ||
			claims.JTI == "" || len(claims.Subject) > 127 || !strings.HasSuffix(claims.Subject, ":run_phase:apply") ||
			!strings.HasPrefix(claims.Subject, "organization:") || strings.Contains(claims.Subject, "federated") {
			t.Fatalf("%s claims %+v (issuer %s)", name, claims, token.Issuer)
		}
		if life := time.Until(token.Expiry); life <= 0 || life > 24*time.Hour {
			t.Fatalf("%s expires in %v", name, life)
		}
		// The kid names a key of the published set.
		header, _, _ := strings.Cut(raw, ".")
		if !strings.Contains(fetchJWKS(t, s), kidOf(t, header)) {
			t.Fatalf("%s: kid not in the JWKS", name)
		}
	}
	if field("AWS_ROLE_ARN") != roleARN || field("ARM_CLIENT_ID") != clientID || field("ARM_TENANT_ID") != tenantID ||
		field("ARM_USE_OIDC") != "true" || field("AZURE_CLIENT_ID") != clientID || field("AZURE_FEDERATED_TOKEN_FILE_SAME") != "yes" {
		t.Fatalf("federation variables:\n%s", logs)
	}
	var gcp struct {
		Type                           string `json:"type"`
		Audience                       string `json:"audience"`
		SubjectTokenType               string `json:"subject_token_type"`
		TokenURL                       string `json:"token_url"`
		ServiceAccountImpersonationURL string `json:"service_account_impersonation_url"`
		CredentialSource               struct {
			File   string `json:"file"`
			Format struct {
				Type string `json:"type"`
			} `json:"format"`
		} `json:"credential_source"`
	}
	decoded, err := decodeB64(field("GCP_CREDENTIALS_B64"))
	if err != nil || json.Unmarshal(decoded, &gcp) != nil {
		t.Fatalf("GOOGLE_APPLICATION_CREDENTIALS is not JSON: %v %s", err, decoded)
	}
	if gcp.Type != "external_account" || gcp.Audience != "//iam.googleapis.com/"+wip ||
		gcp.SubjectTokenType != "urn:ietf:params:oauth:token-type:jwt" || gcp.TokenURL != "https://sts.googleapis.com/v1/token" ||
		gcp.ServiceAccountImpersonationURL != "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/"+account+":generateAccessToken" ||
		!strings.HasSuffix(gcp.CredentialSource.File, "/gcp-subject-token") || gcp.CredentialSource.Format.Type != "text" {
		t.Fatalf("external_account file %+v", gcp)
	}
}

func fetchJWKS(t *testing.T, s *Stack) string {
	t.Helper()
	st, body := call(t, s.Client, http.MethodGet, s.APIURL+workloadIssuerPath+"/.well-known/jwks.json", nil)
	if st != http.StatusOK {
		t.Fatalf("jwks: %d", st)
	}
	return string(body)
}

func kidOf(t *testing.T, header string) string {
	t.Helper()
	raw, err := decodeB64(header)
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err != nil || json.Unmarshal(raw, &h) != nil || h.Alg != "RS256" || h.Kid == "" {
		t.Fatalf("token header %s", raw)
	}
	return fmt.Sprintf("%q", h.Kid)
}

// decodeB64 decodes standard or URL-safe base64, padded or not.
func decodeB64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	return base64.RawStdEncoding.DecodeString(s)
}

// TestCloudAccessSettingsNeverShowASecret drives the dashboard's cloud
// access page: a generic secret written through its form, verified and
// revoked after their confirmations; the page shows the names it sets and
// never the value.
func TestCloudAccessSettingsNeverShowASecret(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	m := s.newMember(t, "cloudaccess")
	wsID := s.createWorkspace(t, m, "cloud-access", "us")
	d := signInToDashboard(t, s, m.email)
	settings := "/workspaces/" + wsID + "/settings/cloud-access"
	const canary = "canary-dashboard-5e2b91"
	post := func(path string, form url.Values) string {
		t.Helper()
		page := d.page(t, settings)
		csrf := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
		if csrf == nil {
			t.Fatalf("no form on the settings page:\n%s", page)
		}
		form.Set("csrf_token", csrf[1])
		req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.DashboardURL)
		resp, err := d.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusSeeOther {
			return d.page(t, resp.Header.Get("Location"))
		}
		return string(body)
	}
	page := post(settings+"/profiles", url.Values{"provider": {"generic_secret"}, "name": {"database"}})
	profile := regexp.MustCompile(`/profiles/(cpr_[a-z0-9]+)/versions"`).FindStringSubmatch(page)
	if profile == nil {
		t.Fatalf("no profile on the page:\n%s", page)
	}
	base := settings + "/profiles/" + profile[1]
	page = post(base+"/versions", url.Values{"provider": {"generic_secret"}, "phase": {"plan_and_apply"},
		"environment": {"TF_VAR_db_password=" + canary + "\nAPI_TOKEN=x"}})
	version := regexp.MustCompile(`/versions/(cpv_[a-z0-9]+)/verify"`).FindStringSubmatch(page)
	if version == nil || !strings.Contains(page, "TF_VAR_db_password") {
		t.Fatalf("no version on the page:\n%s", page)
	}
	if page = post(base+"/versions/"+version[1]+"/verify", url.Values{}); !strings.Contains(page, "Yes, verify") {
		t.Fatalf("verify did not ask for confirmation:\n%s", page)
	}
	if page = post(base+"/versions/"+version[1]+"/verify", url.Values{"confirm": {"yes"}}); !strings.Contains(page, "current") {
		t.Fatalf("verified version not current:\n%s", page)
	}
	if page = post(base+"/versions/"+version[1]+"/revoke", url.Values{"confirm": {"yes"}}); !strings.Contains(page, "revoked") {
		t.Fatalf("revoke:\n%s", page)
	}
	if strings.Contains(page, canary) || strings.Contains(s.Logs(), canary) {
		t.Fatal("the dashboard or a log shows the secret")
	}
}
