package session

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
)

// Flow names a sign-in the browser leaves the dashboard for: a sign-in
// through an identity provider, or an owner's dry run of their SSO.
type Flow string

// Flows.
const (
	FlowSignIn  Flow = "sign_in"
	FlowSSOTest Flow = "sso_test"
)

// Keys of a flow in progress.
const (
	keyFlowSecret = "flow_secret_"
	keyFlowNext   = "flow_next_"
)

// BeginFlow starts a federated flow: it keeps a fresh random secret (and
// where the flow continues) in this browser's session and returns the
// secret's binding, the SHA-256 the API ties the flow to. Only the browser
// whose session holds the secret can redeem what the flow yields, so
// someone else's sign-in code planted in a link signs nobody in here.
// A new flow of the same kind replaces the last.
func (m *Manager) BeginFlow(ctx context.Context, flow Flow, next string) string {
	secret := randomToken()
	m.Put(ctx, keyFlowSecret+string(flow), secret)
	m.Put(ctx, keyFlowNext+string(flow), next)
	return Binding(secret)
}

// EndFlow takes the flow's secret and where it continues out of the
// session: each flow is redeemed at most once. ok is false when this
// session began no such flow.
func (m *Manager) EndFlow(ctx context.Context, flow Flow) (secret, next string, ok bool) {
	secret = m.PopString(ctx, keyFlowSecret+string(flow))
	next = m.PopString(ctx, keyFlowNext+string(flow))
	return secret, next, secret != ""
}

// Binding is the binding of a flow secret as the API expects it: SHA-256,
// base64url without padding.
func Binding(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
