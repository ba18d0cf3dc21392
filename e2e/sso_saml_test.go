package e2e

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/sso/samltest"
)

// samlTarget is a fresh stack of the real binaries and an organization's
// owner; the IdP (samlidp) runs in the test process on 127.0.0.1.
func samlTarget(t *testing.T) samltest.Target {
	t.Helper()
	s := StartStack(t)
	owner := s.newMember(t, "samlowner")
	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return samltest.Target{APIURL: s.APIURL, DashboardURL: s.DashboardURL, OwnerToken: owner.session,
		OrganizationID: owner.orgID, DB: conn, LiveDashboard: true}
}

func TestSAMLSignInEndToEnd(t *testing.T) {
	t.Parallel()
	samltest.SignInScenario(t, samlTarget(t))
}

func TestSAMLNegativeCorpusEndToEnd(t *testing.T) {
	t.Parallel()
	samltest.CorpusScenario(t, samlTarget(t))
}
