package telemetry

// Product analytics (SPEC §6 Analytics events) is the launch funnel alone:
// the steps an organization takes from being created to its first applied
// change. It is not a second channel beside operational telemetry: a step
// is one registered event, launch_funnel, carrying the step and the
// organization's opaque ID, so it crosses the same boundary and can carry
// nothing else — no user, no name, no page, no content.
//
// Automatic capture is off by construction: Cairn records no page views,
// element interactions or sessions, the dashboard loads no analytics
// script, and a step outside FunnelSteps is refused at the boundary.

// Launch funnel steps, in funnel order.
const (
	StepOrganizationCreated = "organization_created"
	StepWorkspaceCreated    = "workspace_created"
	StepCodeHostConnected   = "code_host_connected"
	StepRunCreated          = "run_created"
	StepApplySucceeded      = "apply_succeeded"
)

// FunnelSteps is the allowlist of product analytics: nothing else is
// captured.
var FunnelSteps = []string{StepOrganizationCreated, StepWorkspaceCreated, StepCodeHostConnected, StepRunCreated,
	StepApplySucceeded}

// FunnelEvent is the event of an organization reaching a step.
func FunnelEvent(step, organizationID string) Event {
	return Event{Name: "launch_funnel", Fields: map[string]Value{
		"step":            Enum(step, FunnelSteps...),
		"organization_id": ID(organizationID),
	}}
}
