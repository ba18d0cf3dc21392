package scim

import (
	"fmt"
	"slices"
)

// Group is a team of the organization as SCIM sees it. Members lists only
// the people this SCIM client provisioned: others in the team are not
// SCIM's to see or change.
type Group struct {
	ID          string
	DisplayName string
	ExternalID  *string
	Members     []GroupMember
}

// GroupMember is a provisioned person in a group.
type GroupMember struct {
	UserID   string `db:"user_id"`
	UserName string `db:"user_name"`
}

// resource is the group's attribute map, as a PATCH sees it.
func (g Group) resource() map[string]any {
	res := map[string]any{"displayName": g.DisplayName}
	if g.ExternalID != nil {
		res["externalId"] = *g.ExternalID
	}
	members := make([]any, 0, len(g.Members))
	for _, m := range g.Members {
		members = append(members, map[string]any{"value": m.UserID, "display": m.UserName})
	}
	res["members"] = members
	return res
}

// groupInput is what a create, replace or patch asks a group to become.
type groupInput struct {
	DisplayName string
	ExternalID  *string
	// MemberIDs is the provisioned people the group should hold, sorted
	// and without repeats.
	MemberIDs []string
}

func groupFromResource(res map[string]any) (groupInput, error) {
	var in groupInput
	var err error
	if in.DisplayName, err = textAttribute(res, "displayName", true); err != nil {
		return groupInput{}, err
	}
	externalID, err := textAttribute(res, "externalId", false)
	if err != nil {
		return groupInput{}, err
	}
	if externalID != "" {
		in.ExternalID = &externalID
	}
	for _, item := range asList(res[keyOf(res, "members")]) {
		elem, ok := item.(map[string]any)
		value, _ := elem[keyOf(elem, "value")].(string)
		if !ok || value == "" {
			return groupInput{}, fmt.Errorf("%w: members take a value", ErrInvalidValue)
		}
		in.MemberIDs = append(in.MemberIDs, value)
	}
	slices.Sort(in.MemberIDs)
	in.MemberIDs = slices.Compact(in.MemberIDs)
	return in, nil
}
