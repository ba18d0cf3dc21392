package run_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/run"
)

// overrideRow is one stored override.
type overrideRow struct {
	Justification string    `db:"justification"`
	ActorID       string    `db:"actor_id"`
	ExpiresAt     time.Time `db:"expires_at"`
	CreatedAt     time.Time `db:"created_at"`
}

func (h *harness) overrideRows(runID string) []overrideRow {
	h.t.Helper()
	rows := []overrideRow{}
	if err := h.env.DB.Select(&rows, `SELECT justification, actor_id, expires_at, created_at FROM policy_overrides
		WHERE run_id = $1 ORDER BY created_at`, runID); err != nil {
		h.t.Fatal(err)
	}
	return rows
}

// softFailedRun is a plan_and_apply run of a new workspace whose
// soft-mandatory policy failed: it waits for overrides.
func (h *harness) softFailedRun(name string) run.Run {
	h.t.Helper()
	r := h.plan(h.createRun(h.softPolicyWorkspace(name)), planJSON(h.t))
	if r.Status != run.StatusPolicyOverride {
		h.t.Fatalf("run of %s: %s, want %s", name, r.Status, run.StatusPolicyOverride)
	}
	return r
}

// remoteBackendToken issues u a user token for /api/v2 calls.
func remoteBackendToken(t *testing.T, u *apitest.User) string {
	t.Helper()
	var tok struct{ Token string }
	u.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	return tok.Token
}

func remoteBackendCall(env *apitest.Env, token, method, path string) *apitest.Response {
	return env.Anonymous().Do(apitest.Request{Method: method, Path: path,
		Header: map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/vnd.api+json"}})
}

// TestSoftOverrideNeedsPermissionAndJustification (SPEC §2 Soft override,
// §4 POST /runs/{id}/policy-overrides, §8): over /v1, a member without
// policy:override_soft is refused 403 whatever the body; an empty, blank
// or 2,001-character justification is refused 400; none of them records
// anything. A justification of 2,000 characters (counted as characters,
// not bytes) with white space around it is accepted and stored trimmed.
// The run's review then lists at most 256 overrides, newest first, and
// says when more exist.
func TestSoftOverrideNeedsPermissionAndJustification(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.softFailedRun("override-rules")
	var digest string
	if err := h.env.DB.Get(&digest, `SELECT encode(result_digest, 'hex') FROM policy_results WHERE run_id = $1 AND status = 'failed'`, r.ID); err != nil {
		t.Fatal(err)
	}
	body := func(justification string) map[string]any {
		return map[string]any{"policy_result_digest": digest, "justification": justification,
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	}
	path := "/v1/runs/" + r.ID + "/policy-overrides"

	writer := h.env.SignUp("writer")
	h.env.Join(h.owner, writer, string(access.RoleWriter))
	if resp := writer.Mutate(http.MethodPost, path, body("the writer may approve but not override")); resp.Status != http.StatusForbidden ||
		resp.Code() != httpx.CodeForbidden {
		t.Fatalf("a writer's override: %d %s, want 403", resp.Status, resp.Body)
	}
	for name, justification := range map[string]string{
		"empty":             "",
		"blank":             " \t\n ",
		"2,001 characters":  strings.Repeat("j", 2001),
		"2,001 after a pad": "  " + strings.Repeat("é", 2001) + "  ",
	} {
		if resp := h.owner.Mutate(http.MethodPost, path, body(justification)); resp.Status != http.StatusBadRequest ||
			resp.Code() != httpx.CodeValidationFailed {
			t.Fatalf("%s justification: %d %s, want 400 %s", name, resp.Status, resp.Body, httpx.CodeValidationFailed)
		}
	}
	if rows := h.overrideRows(r.ID); len(rows) != 0 {
		t.Fatalf("refused overrides recorded %+v", rows)
	}
	if got := h.read(r.ID); got.Status != run.StatusPolicyOverride {
		t.Fatalf("refused overrides moved the run to %s", got.Status)
	}

	longest := strings.Repeat("é", 2000) // 4,000 bytes
	h.owner.Mutate(http.MethodPost, path, body("\n  "+longest+"  ")).MustStatus(t, http.StatusCreated)
	rows := h.overrideRows(r.ID)
	if len(rows) != 1 || rows[0].Justification != longest || rows[0].ActorID != h.owner.ID {
		t.Fatalf("accepted override: %d rows", len(rows))
	}
	if got := h.read(r.ID); got.Status != run.StatusAwaitingApproval {
		t.Fatalf("overridden run: %s, want %s", got.Status, run.StatusAwaitingApproval)
	}

	// The review bound: 256 records are all shown; the 257th is the
	// oldest dropped, and the flag says so.
	_, results, err := policy.CheckOfRun(h.ctx, h.env.DB, r.ID)
	if err != nil || len(results) != 1 {
		t.Fatalf("results: %d %v", len(results), err)
	}
	inserted := 1
	insert := func(n int) {
		t.Helper()
		err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) error {
			for range n {
				created := rows[0].CreatedAt.Add(time.Duration(inserted) * time.Second)
				inserted++
				o := policy.Override{ID: id.New("pol"), OrganizationID: r.OrganizationID, RunID: r.ID, PolicyResultID: results[0].ID,
					PlanDigest: r.PlanDigest, PolicyVersionID: results[0].PolicyVersionID, PolicyResultDigest: results[0].ResultDigest,
					Justification: fmt.Sprintf("override %d", inserted), ExpiresAt: created.Add(time.Minute), ActorKind: access.KindUser,
					ActorID: h.owner.ID, RequestID: "req", CreatedAt: created}
				if err := policy.InsertOverride(h.ctx, tx, o); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	type record struct {
		Justification string    `json:"justification"`
		CreatedAt     time.Time `json:"created_at"`
	}
	type listed struct {
		Records   []record
		Truncated bool
	}
	// Both the policy evidence and the run review list them.
	read := func() []listed {
		t.Helper()
		var pv struct {
			Overrides []record `json:"overrides"`
			Truncated bool     `json:"overrides_truncated"`
		}
		h.owner.Get("/v1/runs/"+r.ID+"/policy").MustStatus(t, http.StatusOK).Data(t, &pv)
		var rv struct {
			Overrides struct {
				Records   []record `json:"records"`
				Truncated bool     `json:"truncated"`
			} `json:"overrides"`
		}
		h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &rv)
		return []listed{{pv.Overrides, pv.Truncated}, {rv.Overrides.Records, rv.Overrides.Truncated}}
	}
	insert(policy.MaxOverridesShown - 1)
	for _, v := range read() {
		if len(v.Records) != 256 || v.Truncated || v.Records[255].Justification != longest {
			t.Fatalf("256 overrides read as %d (truncated %v)", len(v.Records), v.Truncated)
		}
	}
	insert(1)
	for _, v := range read() {
		if len(v.Records) != 256 || !v.Truncated || v.Records[0].Justification != fmt.Sprintf("override %d", inserted) ||
			v.Records[255].Justification == longest {
			t.Fatalf("257 overrides read as %d (truncated %v), newest %q", len(v.Records), v.Truncated, v.Records[0].Justification)
		}
		for i := 1; i < len(v.Records); i++ {
			if !v.Records[i].CreatedAt.Before(v.Records[i-1].CreatedAt) {
				t.Fatalf("overrides %d and %d are not newest first", i-1, i)
			}
		}
	}
}

// TestCompatibilityOverrideLastsFifteenMinutes (SPEC §4 POST
// /api/v2/policy-checks/{id}/actions/override, §8): the CLI's body-less
// override is refused 403 to a member without policy:override_soft and
// records nothing; for a holder it waives the soft failure with the fixed
// justification for exactly 15 minutes, the check reads overridden, and
// the gate stays open until that expiry.
func TestCompatibilityOverrideLastsFifteenMinutes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.softFailedRun("compat-override")
	path := "/api/v2/policy-checks/" + policy.CheckID(r.ID) + "/actions/override"

	writer := h.env.SignUp("writer")
	h.env.Join(h.owner, writer, string(access.RoleWriter))
	if resp := remoteBackendCall(h.env, remoteBackendToken(t, writer), http.MethodPost, path); resp.Status != http.StatusForbidden {
		t.Fatalf("a writer's override: %d %s, want 403", resp.Status, resp.Body)
	}
	if rows := h.overrideRows(r.ID); len(rows) != 0 {
		t.Fatalf("a refused override recorded %+v", rows)
	}

	var doc struct {
		Data struct {
			Attributes struct {
				Status string `json:"status"`
			} `json:"attributes"`
		} `json:"data"`
	}
	remoteBackendCall(h.env, remoteBackendToken(t, h.owner), http.MethodPost, path).MustStatus(t, http.StatusOK).JSON(t, &doc)
	if doc.Data.Attributes.Status != "overridden" {
		t.Fatalf("check after the override: %s", doc.Data.Attributes.Status)
	}
	rows := h.overrideRows(r.ID)
	if len(rows) != 1 || rows[0].Justification != run.CompatibilityJustification || rows[0].ActorID != h.owner.ID {
		t.Fatalf("compatibility override: %+v", rows)
	}
	if life := rows[0].ExpiresAt.Sub(rows[0].CreatedAt); life != 15*time.Minute {
		t.Fatalf("compatibility override lasts %s, want 15m", life)
	}
	var pv struct {
		Status string `json:"status"`
		Gate   struct {
			Open  bool       `json:"open"`
			Until *time.Time `json:"until"`
		} `json:"gate"`
	}
	h.owner.Get("/v1/runs/"+r.ID+"/policy").MustStatus(t, http.StatusOK).Data(t, &pv)
	if pv.Status != "overridden" || !pv.Gate.Open || pv.Gate.Until == nil || !pv.Gate.Until.Equal(rows[0].ExpiresAt) {
		t.Fatalf("/v1 policy after the compatibility override: %+v", pv)
	}
	if got := h.read(r.ID); got.Status != run.StatusAwaitingApproval {
		t.Fatalf("overridden run: %s", got.Status)
	}
}
