package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// TestNoBearerSecretAtRestInClear drives the real binaries through
// everything that creates a bearer secret or a sensitive value (token
// issuance and its replay, a sign-in through the dashboard, sensitive
// variables through the API and through the dashboard's proxy), then dumps
// the whole database with pg_dump and looks for each secret in the dump:
// as text, as the hex pg_dump writes bytea in, and inside every decoded
// bytea value. API session tokens the test never sees (the one the
// dashboard holds upstream) are found by their keyed hash: every
// token-shaped string in the dump is hashed and compared with the
// sessions table.
//
// The code host is configured and used: the app is installed (the
// installer's OAuth exchange) and a push is ingested (an installation
// access token fetches the archive), and no installation or user token,
// nor the app's key, webhook secret or client secret, is stored (SPEC §6
// rule 7).
func TestNoBearerSecretAtRestInClear(t *testing.T) {
	t.Parallel()
	fake := githubfake.Start(t)
	s := StartStack(t, WithEnv(codeHostEnv(t, fake)...))
	m := s.newMember(t, "atrest")
	secrets := map[string]string{"API session token": m.session, "user token from sign-up": m.token,
		"password": "correct horse battery staple"}

	// Token issuance, each replayed once: the replay must still return the
	// plaintext, so it is kept, sealed.
	issue := func(what, path string, body any) string {
		key := uniqueKey("issue")
		var first string
		for attempt := 0; attempt < 2; attempt++ {
			status, header, answer := callWithHeader(t, s.Client, http.MethodPost, s.APIURL+path, mustJSON(body), m.mutate(key)...)
			var doc struct{ Data struct{ Token string } }
			_ = json.Unmarshal(answer, &doc)
			if status != http.StatusCreated || doc.Data.Token == "" {
				t.Fatalf("%s (attempt %d): %d %s", what, attempt+1, status, answer)
			}
			if attempt == 0 {
				first = doc.Data.Token
				continue
			}
			if header.Get("Idempotent-Replayed") != "true" || doc.Data.Token != first {
				t.Fatalf("%s replay: replayed=%q, same token=%v", what, header.Get("Idempotent-Replayed"), doc.Data.Token == first)
			}
		}
		return first
	}
	secrets["user token"] = issue("user token", "/v1/user-tokens", map[string]string{"description": "at rest"})
	var sa struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/service-accounts", map[string]string{"name": "deployer"}, &sa, m.mutate(uniqueKey("sa"))...); st != http.StatusCreated {
		t.Fatalf("service account: %d", st)
	}
	secrets["service-account token"] = issue("service-account token", "/v1/service-accounts/"+sa.ID+"/tokens",
		map[string]any{"permissions": []string{"state:read"}, "expires_at": time.Now().Add(24 * time.Hour)})

	wsID := s.createWorkspace(t, m, "at-rest", "us")
	secrets["sensitive variable (API)"] = "api-sensitive-value-0b7d4e1a9c"
	s.setVariable(t, m, wsID, "db_password", secrets["sensitive variable (API)"], true, false)

	// Sign in through the dashboard, as a browser would, and write a
	// sensitive variable through its proxy.
	dashboard := signInToDashboard(t, s, m.email)
	secrets["dashboard session cookie"] = dashboard.cookie
	secrets["sensitive variable (dashboard)"] = "dashboard-sensitive-value-5f3c2a8e61"
	st, answer := dashboard.do(t, http.MethodPost, "/api/control-plane/v1/workspaces/"+wsID+"/variables",
		mustJSON(map[string]any{"key": "api_key", "value": secrets["sensitive variable (dashboard)"], "sensitive": true}))
	if st != http.StatusCreated {
		t.Fatalf("sensitive variable through the dashboard: %d %s", st, answer)
	}

	// An invitation's token (shown to the inviter once) and the signature
	// of a capability URL (an upload that needs no other credential) are
	// bearer secrets too.
	var invited struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/invite-member",
		map[string]string{"email": "invitee-at-rest@example.com", "role": "reader"}, &invited, m.cookie()...); st != http.StatusOK {
		t.Fatalf("invitation: %d", st)
	}
	secrets["invitation token"] = invited.Token
	var cv struct {
		Attributes struct {
			UploadURL string `json:"upload-url"`
		}
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/v2/workspaces/"+wsID+"/configuration-versions",
		map[string]any{"data": map[string]any{"type": "configuration-versions"}}, &cv,
		"Authorization", "Bearer "+m.token, "Content-Type", "application/vnd.api+json"); st != http.StatusCreated {
		t.Fatalf("remote-backend configuration version: %d", st)
	}
	upload, err := url.Parse(cv.Attributes.UploadURL)
	if err != nil {
		t.Fatal(err)
	}
	secrets["upload URL signature"] = upload.Query().Get("signature")

	// The code host: install, then a push whose archive an installation
	// token downloads.
	fake.AddRepository(githubfake.Repository{ID: 9301, Owner: "acme", Name: "infra"})
	fake.AddInstallation(githubfake.Installation{ID: 4301, AccountLogin: "acme", Repositories: []int64{9301}})
	s.installApp(t, m, fake, 4301)
	if st := s.apiJSON(t, http.MethodPut, "/v1/workspaces/"+wsID+"/source", map[string]any{"repository_id": 9301,
		"tracked_branch": "main"}, nil, m.mutate(uniqueKey("source"))...); st != http.StatusCreated {
		t.Fatalf("source settings: %d", st)
	}
	sha := fake.Commit(9301, "main", "at rest", map[string]string{"main.tf": "terraform {}\n"})
	d := githubfake.NewDelivery("push", fake.Push(t, 4301, 9301, githubfake.PushOptions{Branch: "main",
		Before: strings.Repeat("5", 40), After: sha, Paths: [][]string{{"main.tf"}}}))
	req, err := d.Request(context.Background(), s.APIURL+"/v1/github/webhooks", e2eWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push delivery: %d", resp.StatusCode)
	}
	s.newestRun(t, m, wsID, 2*time.Minute, func(v runView) bool { return v.Kind == "plan_and_apply" })
	tokens := fake.IssuedTokens()
	if len(tokens) < 2 {
		t.Fatalf("%d code-host tokens issued; the installation and the ingestion should each have made one", len(tokens))
	}
	for i, tok := range tokens {
		secrets[fmt.Sprintf("code-host token %d", i)] = tok
	}
	keyLines := strings.Split(strings.TrimSpace(string(fake.KeyPEM)), "\n")
	secrets["code-host app private key"] = keyLines[len(keyLines)/2]
	secrets["code-host webhook secret"] = e2eWebhookSecret
	secrets["code-host client secret"] = githubfake.ClientSecret

	dump := dumpDatabase(t, s.DatabaseURL)
	haystack := withDecodedBytea(dump)
	for what, plaintext := range secrets {
		if plaintext == "" {
			t.Fatalf("%s is empty; the test lost it", what)
		}
		for _, form := range [][]byte{[]byte(plaintext), []byte(hex.EncodeToString([]byte(plaintext)))} {
			if i := bytes.Index(haystack, form); i >= 0 {
				t.Errorf("the database dump holds the %s in clear: …%q…", what, excerpt(haystack, i))
				break
			}
		}
		if strings.Contains(s.Logs(), plaintext) {
			t.Errorf("the process logs hold the %s", what)
		}
	}

	hashes := sessionHashes(t, s.DatabaseURL)
	if len(hashes) < 2 {
		t.Fatalf("%d API sessions; the dashboard sign-in should have made a second", len(hashes))
	}
	key := secret.Derive(config.Secret("e2e-auth-secret-0123456789abcdef0123456789abcdef"), "session-token")
	// The scanner itself must find a session token that is there.
	if found := sessionTokensIn([]byte("|"+m.session+"|"), key, hashes); len(found) != 1 {
		t.Fatalf("the session-token scanner misses a planted token (%d found)", len(found))
	}
	for _, token := range sessionTokensIn(haystack, key, hashes) {
		t.Errorf("the database dump holds a live API session token in clear (%s…)", token[:6])
	}
}

// dumpDatabase runs the real pg_dump (the cluster's own version) over the
// whole database: schema and every table's data.
func dumpDatabase(t *testing.T, databaseURL string) []byte {
	t.Helper()
	bin, err := devstack.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--no-owner", "--no-privileges", "--dbname", databaseURL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, stderr.String())
	}
	if !bytes.Contains(out, []byte("COPY public.idempotency_records")) || !bytes.Contains(out, []byte("COPY public.dashboard_sessions")) {
		t.Fatalf("the dump lacks the tables under test (%d bytes)", len(out))
	}
	return out
}

// byteaHex is how pg_dump's COPY text writes a bytea value.
var byteaHex = regexp.MustCompile(`\\\\x((?:[0-9a-f]{2})+)`)

// withDecodedBytea appends every bytea value of the dump, decoded, to the
// dump itself: a secret inside binary data (a gob-encoded session, a JSON
// body kept as bytes) is then searchable as text.
func withDecodedBytea(dump []byte) []byte {
	out := append([]byte{}, dump...)
	for _, m := range byteaHex.FindAllSubmatch(dump, -1) {
		decoded := make([]byte, hex.DecodedLen(len(m[1])))
		if n, err := hex.Decode(decoded, m[1]); err == nil {
			out = append(append(out, '\n'), decoded[:n]...)
		}
	}
	return out
}

// sessionHashes are the keyed hashes of every API session.
func sessionHashes(t *testing.T, databaseURL string) map[string]bool {
	t.Helper()
	conn, err := db.Open(context.Background(), databaseURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var rows [][]byte
	if err := conn.Select(&rows, `SELECT token_hash FROM sessions`); err != nil {
		t.Fatal(err)
	}
	hashes := map[string]bool{}
	for _, h := range rows {
		hashes[string(h)] = true
	}
	return hashes
}

// sessionTokenRun matches runs of the API session token alphabet
// (unpadded base64url); a token is 43 characters of such a run.
var sessionTokenRun = regexp.MustCompile(`[A-Za-z0-9_-]{43,}`)

// sessionTokensIn returns every 43-character window of haystack whose
// keyed hash is a stored session's: a session token in clear.
func sessionTokensIn(haystack, key []byte, hashes map[string]bool) []string {
	var found []string
	for _, run := range sessionTokenRun.FindAll(haystack, -1) {
		for i := 0; i+43 <= len(run); i++ {
			m := hmac.New(sha256.New, key)
			m.Write(run[i : i+43])
			if hashes[string(m.Sum(nil))] {
				found = append(found, string(run[i:i+43]))
			}
		}
	}
	return found
}

func excerpt(b []byte, i int) string {
	start, end := max(0, i-40), min(len(b), i+80)
	return string(b[start:end])
}
