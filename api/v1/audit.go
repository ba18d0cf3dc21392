package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/cursor"
)

type listAuditInput struct {
	ListParams
	Action  string `query:"action" maxLength:"100" pattern:"^[a-z0-9_.]*$" doc:"Only events of this exact type, e.g. user_token.created."`
	ActorID string `query:"actor_id" maxLength:"64" doc:"Only events caused by this exact actor ID."`
}

var auditList = listSpec{endpoint: "audit-events", invalidCode: "AUDIT_EVENT_LIST_CURSOR_INVALID"}

func (a *API) registerAudit() {
	register(a, huma.Operation{
		OperationID: "list-audit-events", Method: http.MethodGet, Path: "/v1/audit-events",
		Summary: "List the organization's audit events, newest first", Tags: []string{"Audit"},
	}, operationOptions{}, func(ctx context.Context, in *listAuditInput) (*Listed[AuditEventView], error) {
		// The filters are bound into the cursor: a cursor of one filtered
		// list is refused by another.
		filters := "action=" + in.Action + "&actor_id=" + in.ActorID
		return listOf(ctx, a, auditList, filters, in.ListParams, func(p access.Principal, page cursor.Page) ([]AuditEventView, error) {
			rows, err := a.deps.Services.Audit.List(ctx, p, audit.Filter{Action: in.Action, ActorID: in.ActorID}, page)
			return mapSlice(rows, auditEventView), err
		}, func(v AuditEventView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})
}
