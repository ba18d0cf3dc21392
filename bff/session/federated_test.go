package session

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"testing"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// TestFlowIsBoundToItsSessionAndEndsOnce: a flow's binding is the SHA-256
// of a secret only the session holds; ending the flow hands the secret
// and where sign-in continues back once; another session, or another kind
// of flow, holds nothing.
func TestFlowIsBoundToItsSessionAndEndsOnce(t *testing.T) {
	t.Parallel()
	m := New(dbtest.New(t), config.Config{AuthSecret: "session-test-secret-0123456789abcdef0123456789"}, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	browser, err := m.Load(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	binding := m.BeginFlow(browser, FlowSignIn, "/oauth/consent?client_id=x")
	if again := m.BeginFlow(browser, FlowSignIn, "/oauth/consent?client_id=x"); again == binding {
		t.Fatal("a new flow reused the last one's secret")
	} else {
		binding = again
	}
	other, err := m.Load(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := m.EndFlow(other, FlowSignIn); ok {
		t.Fatal("another session ended the flow")
	}
	if _, _, ok := m.EndFlow(browser, FlowSSOTest); ok {
		t.Fatal("an SSO test ended a sign-in flow")
	}
	secret, next, ok := m.EndFlow(browser, FlowSignIn)
	sum := sha256.Sum256([]byte(secret))
	if !ok || next != "/oauth/consent?client_id=x" || base64.RawURLEncoding.EncodeToString(sum[:]) != binding || len(secret) < 32 {
		t.Fatalf("ended flow: secret %d bytes, next %q, ok %v; binding %q", len(secret), next, ok, binding)
	}
	if _, _, ok := m.EndFlow(browser, FlowSignIn); ok {
		t.Fatal("the flow ended twice")
	}
}
