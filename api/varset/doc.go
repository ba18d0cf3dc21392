// Package varset is variable sets: variables an organization defines once
// and applies to every workspace (global), to the workspaces of chosen
// projects, or to chosen workspaces. It resolves, for a workspace, which
// value of each (category, key) a new run gets, by one precedence order
// (Tier) shared by the effective-variables view and run creation, so what
// the view shows is what a run pins.
package varset
