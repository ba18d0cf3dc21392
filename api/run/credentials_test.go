package run_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/run"
)

// genericSecret gives the workspace a verified generic secret setting
// TF_VAR_name, and returns the profile and version IDs.
func (h *harness) genericSecret(workspaceID, name, value string) (profileID, versionID string) {
	h.t.Helper()
	var p, v struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/credential-profiles", map[string]string{"provider": "generic_secret"}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &p)
	h.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{"phase": "plan_and_apply",
		"configuration": map[string]any{"environment": map[string]string{"TF_VAR_" + name: value}}}).MustStatus(h.t, http.StatusCreated).Data(h.t, &v)
	h.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", nil).MustStatus(h.t, http.StatusOK)
	return p.ID, v.ID
}

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	var ue credential.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("redemption error %v is not an unavailability", err)
	}
	return ue.Reason
}

// flip changes the first character of s.
func flip(s string) string {
	if s[0] == 'x' {
		return "y" + s[1:]
	}
	return "x" + s[1:]
}

func TestCredentialHandleRedeemsOnceForItsExactAttempt(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("redeem")
	h.genericSecret(ws, "db_password", "s3cret-value")
	st := h.start(h.createRun(ws), run.PhasePlan)
	if st.Credentials == nil || len(st.Credentials.Manifest.Credentials) != 1 {
		t.Fatalf("no grant issued: %+v", st.Credentials)
	}
	dir := t.TempDir()
	good := *st.Credentials

	// Every tampered presentation is refused and leaves the handle usable.
	for name, tamper := range map[string]func(g *credential.Grant){
		"wrong nonce":       func(g *credential.Grant) { g.Nonce = flip(g.Nonce) },
		"wrong handle":      func(g *credential.Grant) { g.Handle = flip(g.Handle) },
		"another phase":     func(g *credential.Grant) { g.Manifest.RunPhase = credential.RunPhaseApply },
		"another attempt":   func(g *credential.Grant) { g.Manifest.AttemptID = "att_aaaaaaaaaaaaaaaaaaaaaaaaaa" },
		"fewer credentials": func(g *credential.Grant) { g.Manifest.Credentials = nil },
	} {
		g := good
		g.Manifest.Credentials = slices.Clone(good.Manifest.Credentials)
		tamper(&g)
		s := st
		s.Credentials = &g
		if _, err := h.runs.RedeemCredentials(h.ctx, s, dir); reasonOf(t, err) != credential.ReasonHandleRefused {
			t.Fatalf("%s: %v", name, err)
		}
	}
	m, err := h.runs.RedeemCredentials(h.ctx, st, dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Env["TF_VAR_db_password"] != "s3cret-value" || !slices.Contains(m.Secrets, "s3cret-value") {
		t.Fatalf("materials %+v", m.Env)
	}
	if _, err := h.runs.RedeemCredentials(h.ctx, st, dir); reasonOf(t, err) != credential.ReasonHandleRefused {
		t.Fatalf("second redemption: %v", err)
	}
}

func TestArchiveAfterIssuanceBlocksRedemption(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("archived")
	profile, _ := h.genericSecret(ws, "token", "value")
	r := h.createRun(ws)
	st := h.start(r, run.PhasePlan)
	h.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+profile+"/actions/archive", map[string]any{}).MustStatus(t, http.StatusOK)
	_, err := h.runs.RedeemCredentials(h.ctx, st, t.TempDir())
	reason := reasonOf(t, err)
	if reason != credential.ReasonProfileArchived {
		t.Fatalf("redemption after archive: %v", err)
	}
	if err := h.runs.FailCredentials(h.ctx, st.Attempt.ID, reason, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.read(r.ID); got.Status != run.StatusCredentialsRequired || got.TerminalReason == nil || *got.TerminalReason != reason {
		t.Fatalf("run after a refused redemption: %s %v", got.Status, got.TerminalReason)
	}
}

func TestRunWithoutUsableCredentialsNeverStarts(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("unusable")
	profile, version := h.genericSecret(ws, "token", "value")
	// The profile is active; its current version revoked leaves it
	// without one, so a new run's snapshot fails.
	h.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+profile+"/versions/"+version+"/actions/revoke", map[string]any{}).
		MustStatus(t, http.StatusOK)
	r := h.createRun(ws)
	if r.CredentialSnapshotError == nil || *r.CredentialSnapshotError != credential.ReasonVersionUnavailable {
		t.Fatalf("snapshot error %v", r.CredentialSnapshotError)
	}
	_, err := h.runs.StartAttempt(h.ctx, h.queued(r, run.PhasePlan).ID, "test-worker", "local")
	if !errors.Is(err, run.ErrCredentialsUnavailable) {
		t.Fatalf("start: %v", err)
	}
	if got := h.read(r.ID); got.Status != run.StatusCredentialsRequired || got.PlanStatus != run.PhaseErrored {
		t.Fatalf("run %s plan %s", got.Status, got.PlanStatus)
	}
	// A draft profile (never verified) is left out of snapshots.
	var draft struct{ ID string }
	other := h.workspace("draft")
	h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+other+"/credential-profiles", map[string]string{"provider": "aws"}).
		MustStatus(t, http.StatusCreated).Data(t, &draft)
	if r := h.createRun(other); r.CredentialSnapshotError != nil {
		t.Fatalf("a draft failed the snapshot: %s", *r.CredentialSnapshotError)
	}
}
