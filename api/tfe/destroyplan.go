package tfe

import "errors"

// errDestroyPlan refuses a workspace that would allow destroy plans.
var errDestroyPlan = errors.New("allow-destroy-plan refused")

// refuseDestroyPlan answers a workspace asking for destroy plans: Cairn
// never runs one, and storing false in its place would leave the tfe
// provider (whose allow_destroy_plan defaults to true) planning the same
// change forever. False or absent is what Cairn does anyway.
func refuseDestroyPlan(a workspaceAttributes) error {
	if a.AllowDestroyPlan != nil && *a.AllowDestroyPlan {
		return errDestroyPlan
	}
	return nil
}
