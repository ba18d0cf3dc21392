package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
)

var auditList = listSpec{endpoint: "audit-events", invalidCode: "AUDIT_EVENT_LIST_CURSOR_INVALID"}

func (a *API) registerAudit() {
	register(a, huma.Operation{
		OperationID: "list-audit-events", Method: http.MethodGet, Path: "/v1/audit-events",
		Summary: "List the organization's audit events, newest first", Tags: []string{"Audit"},
	}, operationOptions{}, func(ctx context.Context, in *ListParams) (*Listed[AuditEventView], error) {
		return listOf(ctx, a, auditList, "", *in, func(p access.Principal, page cursor.Page) ([]AuditEventView, error) {
			rows, err := a.deps.Services.Audit.List(ctx, p, page)
			return mapSlice(rows, auditEventView), err
		}, func(v AuditEventView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})
}
