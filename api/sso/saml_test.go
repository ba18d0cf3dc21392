package sso_test

import (
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/sso/samltest"
)

// samlTarget is an in-process API server and an organization's owner.
func samlTarget(t *testing.T) samltest.Target {
	t.Helper()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	return samltest.Target{APIURL: env.URL, DashboardURL: env.Config.DashboardURL, OwnerToken: owner.Token,
		OrganizationID: owner.OrganizationID, DB: env.DB}
}

func TestSAMLSignInThroughTheACS(t *testing.T) {
	t.Parallel()
	samltest.SignInScenario(t, samlTarget(t))
}

func TestSAMLACSRefusesTheNegativeCorpus(t *testing.T) {
	t.Parallel()
	samltest.CorpusScenario(t, samlTarget(t))
}
