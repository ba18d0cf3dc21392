package run_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// without returns the owner's permissions less drop.
func without(drop access.Permission) access.PermissionSet {
	var keep []access.Permission
	for _, p := range access.PermissionsOf(access.RoleOwner).List() {
		if p != drop {
			keep = append(keep, p)
		}
	}
	return access.NewPermissionSet(keep...)
}

// TestRecoverRefusalsAndLeaseFields (SPEC §3 Run recovery, §4 recover,
// §5 rule 6, §2 Run lease fields): a recover request without run:recover,
// without state:recover, with a step-up older than 15 minutes, with
// evidence other than what the review shows, or without
// confirm_fence_advance is refused and prepares nothing; cancel does not
// end the recovery either. A prepared recovery whose answer was lost shows
// its lease in the /v1 review, the remaining seconds from the database
// clock clamped to 0..900, and neither field once the lease expired.
func TestRecoverRefusalsAndLeaseFields(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r, emergency := h.failedApply(h.workspace("refusals"), false)
	// The failed apply left no state: the review shows none as current.
	good := run.RecoverInput{Resolution: run.ResolutionImportEmergencyState, EmergencyStateDigest: run.HexDigest(emergency.SHA256),
		Reason: "import what the failed apply kept", ConfirmFenceAdvance: true}
	settled := func(context.Context, *sqlx.Tx, run.Run) error { return nil }
	owner := h.ownerPrincipal()

	noRunRecover, noStateRecover, stale := owner, owner, owner
	noRunRecover.Permissions = without(access.PermRunRecover)
	noStateRecover.Permissions = without(access.PermStateRecover)
	stale.ReauthenticatedAt = time.Now().Add(-16 * time.Minute)
	otherState, otherEmergency, unconfirmed := good, good, good
	otherState.CurrentStateDigest = strings.Repeat("0", 64)
	otherEmergency.EmergencyStateDigest = strings.Repeat("1", 64)
	unconfirmed.ConfirmFenceAdvance = false
	for name, tc := range map[string]struct {
		p    access.Principal
		in   run.RecoverInput
		want error
	}{
		"without run:recover":           {noRunRecover, good, fault.ErrForbidden},
		"without state:recover":         {noStateRecover, good, fault.ErrForbidden},
		"step-up 16 minutes old":        {stale, good, access.ErrStepUpRequired},
		"another current state digest":  {owner, otherState, run.ErrRecoveryEvidence},
		"another emergency digest":      {owner, otherEmergency, run.ErrRecoveryEvidence},
		"confirm_fence_advance missing": {owner, unconfirmed, run.ErrRecoveryConfirmation},
	} {
		if _, err := h.runs.Recover(h.ctx, tc.p, r.ID, tc.in, settled); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		// A refusal for its evidence comes after the lease was taken in
		// its own transaction, which the refusal rolls back.
		if rec, err := h.runs.RecoveryOf(h.ctx, h.env.DB, r.ID); err != nil || rec != nil {
			t.Fatalf("%s prepared a recovery: %+v %v", name, rec, err)
		}
	}
	// Over HTTP: a writer holds neither recovery permission (403), and
	// a request without the confirmation is invalid (400).
	writer := h.env.SignUp("writer")
	h.env.Join(h.owner, writer, string(access.RoleWriter))
	body := map[string]any{"resolution": good.Resolution, "current_state_version_id": nil, "current_state_digest": "",
		"emergency_state_digest": good.EmergencyStateDigest, "reason": good.Reason, "confirm_fence_advance": true}
	writer.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/recover", body).MustStatus(t, http.StatusForbidden)
	body["confirm_fence_advance"] = false
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/recover", body).MustStatus(t, http.StatusBadRequest)
	if resp := h.owner.Mutate(http.MethodPost, "/v1/runs/"+r.ID+"/actions/cancel", nil); resp.Status != http.StatusConflict || resp.Code() != "RUN_ACTION_NOT_ALLOWED" {
		t.Fatalf("cancel of a run in recovery = %d %s", resp.Status, resp.Body)
	}

	type lease struct {
		Status                string     `json:"status"`
		LeaseExpiresAt        *time.Time `json:"lease_expires_at"`
		LeaseRemainingSeconds *int       `json:"lease_remaining_seconds"`
	}
	review := func() lease {
		t.Helper()
		var v lease
		h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &v)
		return v
	}
	if v := review(); v.Status != "recovery_required" || v.LeaseExpiresAt != nil || v.LeaseRemainingSeconds != nil {
		t.Fatalf("before any recovery: %+v", v)
	}
	// The recovery is prepared and its answer lost: the lease stays.
	lost := errors.New("the answer could not be stored")
	if _, err := h.runs.Recover(h.ctx, owner, r.ID, good, func(context.Context, *sqlx.Tx, run.Run) error { return lost }); !errors.Is(err, lost) {
		t.Fatalf("recover with a lost answer: %v", err)
	}
	v := review()
	if v.LeaseExpiresAt == nil || v.LeaseRemainingSeconds == nil || *v.LeaseRemainingSeconds < 880 || *v.LeaseRemainingSeconds > 900 ||
		v.LeaseExpiresAt.Sub(time.Now()) > run.RecoveryLease+time.Minute {
		t.Fatalf("an active lease: %+v", v)
	}
	for _, tc := range []struct {
		set  string
		want *int
	}{
		{"now() + interval '2 hours'", new(900)},
		{"now() + interval '30 seconds'", new(30)},
		{"now() - interval '1 second'", nil},
	} {
		if _, err := h.env.DB.Exec(`UPDATE run_recoveries SET lease_expires_at = `+tc.set+` WHERE run_id = $1`, r.ID); err != nil {
			t.Fatal(err)
		}
		v := review()
		switch {
		case tc.want == nil && (v.LeaseExpiresAt != nil || v.LeaseRemainingSeconds != nil):
			t.Fatalf("lease at %s: %+v, want none", tc.set, v)
		case tc.want != nil && (v.LeaseExpiresAt == nil || v.LeaseRemainingSeconds == nil ||
			*v.LeaseRemainingSeconds > *tc.want || *v.LeaseRemainingSeconds < *tc.want-5):
			t.Fatalf("lease at %s: %+v, want %d remaining", tc.set, v, *tc.want)
		}
	}
}
