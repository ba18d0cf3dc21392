package scim

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/identity"
)

// maxTextChars bounds userName, externalId and displayName.
const maxTextChars = 256

// DeactivatedReason is what a SCIM deactivation records as the ban reason.
const DeactivatedReason = "Deactivated via SCIM"

// User is a person an organization's SCIM client provisioned.
type User struct {
	ID             string
	OrganizationID string
	UserName       string
	ExternalID     *string
	Active         bool
	// Attributes is everything else the client sent (name, emails,
	// displayName, extensions …), given back on reads.
	Attributes map[string]any
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// reservedUserAttributes are kept in their own columns, derived, or
// never stored (the password: provisioned accounts sign in through the
// identity provider; groups: membership is written through Groups).
var reservedUserAttributes = []string{"id", "meta", "schemas", "userName", "externalId", "active", "password", "groups"}

// resource is the user's full attribute map, as a PATCH sees it.
func (u User) resource() map[string]any {
	res := cloneMap(u.Attributes)
	res["userName"] = u.UserName
	res["active"] = u.Active
	if u.ExternalID != nil {
		res["externalId"] = *u.ExternalID
	}
	return res
}

// userFromResource reads a user's stored fields from a full attribute map
// (a create or replace body, or a patched resource). Without an active
// attribute the user is activeByDefault: a create makes an active person,
// a replace that leaves active out keeps the person's state.
func userFromResource(res map[string]any, activeByDefault bool) (User, error) {
	var u User
	var err error
	if u.UserName, err = textAttribute(res, "userName", true); err != nil {
		return User{}, err
	}
	externalID, err := textAttribute(res, "externalId", false)
	if err != nil {
		return User{}, err
	}
	if externalID != "" {
		u.ExternalID = &externalID
	}
	if _, err := textAttribute(res, "displayName", false); err != nil {
		return User{}, err
	}
	u.Active = activeByDefault
	if v, ok := res[keyOf(res, "active")]; ok && v != nil {
		active, ok := v.(bool)
		if !ok {
			return User{}, fmt.Errorf("%w: active is a boolean", ErrInvalidValue)
		}
		u.Active = active
	}
	u.Attributes = cloneMap(res)
	for _, k := range reservedUserAttributes {
		delete(u.Attributes, keyOf(u.Attributes, k))
	}
	return u, nil
}

func textAttribute(res map[string]any, name string, required bool) (string, error) {
	v, ok := res[keyOf(res, name)]
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("%w: %s is required", ErrInvalidValue, name)
		}
		return "", nil
	}
	s, ok := v.(string)
	s = strings.TrimSpace(s)
	if !ok || (required && s == "") || utf8.RuneCountInString(s) > maxTextChars || !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: %s is text of at most %d characters", ErrInvalidValue, name, maxTextChars)
	}
	return s, nil
}

// displayName is the user's displayName attribute, or nil.
func (u User) displayName() *string {
	s, _ := u.Attributes[keyOf(u.Attributes, "displayName")].(string)
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return &s
}

// email is the account's address: the primary e-mail, else the first,
// else the userName when it is an address.
func (u User) email() (string, error) {
	var first, primary string
	for _, item := range asList(u.Attributes[keyOf(u.Attributes, "emails")]) {
		elem, ok := item.(map[string]any)
		if !ok {
			continue
		}
		value, _ := elem[keyOf(elem, "value")].(string)
		if value == "" {
			continue
		}
		if first == "" {
			first = value
		}
		if p, _ := elem[keyOf(elem, "primary")].(bool); p && primary == "" {
			primary = value
		}
	}
	for _, candidate := range []string{primary, first, u.UserName} {
		if candidate == "" {
			continue
		}
		if email, err := identity.NormalizeEmail(candidate); err == nil {
			return email, nil
		}
		if candidate != u.UserName {
			return "", fmt.Errorf("%w: emails value %q is not an e-mail address", ErrInvalidValue, candidate)
		}
	}
	return "", fmt.Errorf("%w: a user needs an e-mail address (emails, or a userName that is one)", ErrInvalidValue)
}

// accountName is the account's display name: displayName, name.formatted,
// given and family names, or the userName.
func (u User) accountName() string {
	if d := u.displayName(); d != nil {
		return truncate(*d)
	}
	name, _ := u.Attributes[keyOf(u.Attributes, "name")].(map[string]any)
	if formatted, _ := name[keyOf(name, "formatted")].(string); strings.TrimSpace(formatted) != "" {
		return truncate(formatted)
	}
	given, _ := name[keyOf(name, "givenName")].(string)
	family, _ := name[keyOf(name, "familyName")].(string)
	if full := strings.TrimSpace(given + " " + family); full != "" {
		return truncate(full)
	}
	return truncate(u.UserName)
}

func truncate(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= 200 {
		return s
	}
	return string([]rune(s)[:200])
}

// cloneMap deep-copies a decoded JSON object.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		// Attributes come from decoded JSON: they always encode.
		panic(fmt.Sprintf("scim: attributes do not encode: %v", err))
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(fmt.Sprintf("scim: attributes do not decode: %v", err))
	}
	return out
}
