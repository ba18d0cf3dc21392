package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/fault"
)

type runProbeInput struct {
	RunID string `path:"runId" maxLength:"64"`
}

type workspaceProbeInput struct {
	WorkspaceID string `path:"workspaceId" maxLength:"64"`
}

func (a *API) registerLaunchAccess() {
	probe := func(op huma.Operation) huma.Operation {
		op.Tags = []string{"Launch access"}
		op.Description = "Answers 200 with how the caller is admitted, or the non-disclosing 503 service_unavailable " +
			"(Retry-After: 60, private no-store) when the launch gate is closed for it or the resource cannot be resolved. " +
			"A suspension does not close a probe: it refuses mutations, never reads."
		return op
	}
	register(a, probe(huma.Operation{
		OperationID: "probe-launch-access", Method: http.MethodGet, Path: "/v1/launch-access",
		Summary: "Organization-wide admission probe",
	}), operationOptions{}, func(ctx context.Context, _ *struct{}) (*Single[LaunchAccessView], error) {
		return single(ctx, a, func(p access.Principal) (LaunchAccessView, error) {
			return a.admission(ctx, "organization", p.OrganizationID, launch.Subject{OrganizationID: p.OrganizationID})
		})
	})

	register(a, probe(huma.Operation{
		OperationID: "probe-workspace-launch-access", Method: http.MethodGet, Path: "/v1/launch-access/workspaces/{workspaceId}",
		Summary: "Workspace admission probe",
	}), operationOptions{}, func(ctx context.Context, in *workspaceProbeInput) (*Single[LaunchAccessView], error) {
		return single(ctx, a, func(p access.Principal) (LaunchAccessView, error) {
			w, err := a.deps.Services.Workspaces.GetWorkspace(ctx, p, in.WorkspaceID)
			if err != nil {
				// Unknown and inaccessible resources are unresolved, and an
				// unresolved probe fails closed without saying which.
				return LaunchAccessView{}, fault.ErrAdmissionClosed
			}
			return a.admission(ctx, "workspace", w.ID, launch.Subject{OrganizationID: w.OrganizationID, WorkspaceID: w.ID})
		})
	})

	register(a, probe(huma.Operation{
		OperationID: "probe-run-launch-access", Method: http.MethodGet, Path: "/v1/launch-access/runs/{runId}",
		Summary: "Run admission probe",
	}), operationOptions{}, func(ctx context.Context, in *runProbeInput) (*Single[LaunchAccessView], error) {
		return single(ctx, a, func(p access.Principal) (LaunchAccessView, error) {
			r, err := a.deps.Services.Runs.GetRun(ctx, p, in.RunID)
			if err != nil {
				return LaunchAccessView{}, fault.ErrAdmissionClosed
			}
			return a.admission(ctx, "run", r.ID, launch.Subject{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID})
		})
	})
}

// admission answers a probe by the launch gate alone. The probes guard the
// dashboard's pages, which read; a suspension refuses mutations (each is
// admitted on its own) but never reads or cancellation (SPEC §1 rule 7),
// so a suspended workspace's pages must still render.
func (a *API) admission(ctx context.Context, scope, resourceID string, subject launch.Subject) (LaunchAccessView, error) {
	d, err := a.deps.Services.Launch.RequireBy(ctx, nil, subject, launch.AdmitAccess)
	if err != nil {
		return LaunchAccessView{}, err
	}
	return LaunchAccessView{ID: resourceID, Object: "launch_access", Scope: scope, Admission: string(d.Admission)}, nil
}
