package run_test

import (
	"net/http"
	"testing"
)

// TestCreateRunRefusesAutoApplyAndDestroyWhateverTheirValue: POST /v1/runs
// refuses a body that carries auto_apply or is_destroy at all (true, false,
// null or anything else) with the field's own code, before anything is
// persisted: no run, no stored idempotent answer, no audit event.
func TestCreateRunRefusesAutoApplyAndDestroyWhateverTheirValue(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("refused-fields")
	count := func(query string) int {
		t.Helper()
		var n int
		if err := h.env.DB.Get(&n, query, h.owner.OrganizationID); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const (
		storedAnswers = `SELECT count(*) FROM idempotency_records WHERE organization_id = $1 AND route = '/v1/runs'`
		runEvents     = `SELECT count(*) FROM audit_events WHERE organization_id = $1 AND action LIKE 'run.%'`
	)
	answersBefore, eventsBefore := count(storedAnswers), count(runEvents)
	for _, field := range []struct{ name, code string }{
		{"auto_apply", "RUN_AUTO_APPLY_UNSUPPORTED"},
		{"is_destroy", "RUN_DESTROY_UNSUPPORTED"},
	} {
		for _, value := range []any{true, false, nil, "false", 0, map[string]any{}} {
			resp := h.createRunWith(ws, map[string]any{field.name: value, "kind": "plan_only"})
			if resp.Status != http.StatusBadRequest || resp.Code() != field.code {
				t.Errorf("%s %#v: %d %s, want 400 %s", field.name, value, resp.Status, resp.Body, field.code)
			}
		}
	}
	if n := h.runCount(ws); n != 0 {
		t.Fatalf("%d runs persisted by refused requests", n)
	}
	if n := count(storedAnswers); n != answersBefore {
		t.Fatalf("refused requests stored %d idempotent answers", n-answersBefore)
	}
	if n := count(runEvents); n != eventsBefore {
		t.Fatalf("refused requests wrote %d run audit events", n-eventsBefore)
	}
	// Without either key the same request creates its run.
	h.createdRun(h.createRunWith(ws, map[string]any{"kind": "plan_only"}))
}
