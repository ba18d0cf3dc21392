package github_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

// TestInstallationCallbackNeedsTheAccountsAdmin: seeing an installation is
// not enough to bind it. A member of the organization it is installed on
// who is not an admin, an admin whose membership is still pending, an
// unrelated person who can see it and an admin of another organization are
// refused with GITHUB_INSTALLER_UNVERIFIED: nothing is bound and the state
// stays usable, and an active admin then binds it with that same state. On
// a personal account only that account's own person may bind it.
func TestInstallationCallbackNeedsTheAccountsAdmin(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.fake.AddRepository(githubfake.Repository{ID: 7201, Owner: "acme", Name: "infra"})
	s.fake.AddInstallation(githubfake.Installation{ID: 621, AccountLogin: "acme", Repositories: []int64{7201}})
	s.fake.AddInstallation(githubfake.Installation{ID: 622, AccountLogin: "elsewhere"})
	state := s.startState(t, s.owner)
	for name, p := range map[string]githubfake.Person{
		"a member who is not an admin": {Login: "member", ID: 11, Sees: []int64{621},
			Memberships: map[string]githubfake.Membership{"acme": {State: "active", Role: "member"}}},
		"an admin whose invitation is pending": {Login: "invited", ID: 12, Sees: []int64{621},
			Memberships: map[string]githubfake.Membership{"acme": {State: "pending", Role: "admin"}}},
		"an unrelated person who sees it": {Login: "outsider", ID: 13, Sees: []int64{621}},
		"an admin of another organization": {Login: "neighbour", ID: 14, Sees: []int64{621, 622},
			Memberships: map[string]githubfake.Membership{"elsewhere": {State: "active", Role: "admin"}}},
	} {
		res := s.callbackAs(t, s.owner, state, 621, s.fake.PersonCode(p))
		if res.Status != http.StatusForbidden || res.Code() != "GITHUB_INSTALLER_UNVERIFIED" {
			t.Fatalf("%s: %d %s", name, res.Status, res.Body)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM github_installations`) + s.count(t, `SELECT count(*) FROM github_repositories`); n != 0 {
		t.Fatalf("a refused callback bound %d rows", n)
	}
	if n := s.count(t, `SELECT count(*) FROM github_install_states WHERE consumed_at IS NOT NULL`); n != 0 {
		t.Fatal("a refused callback consumed the state")
	}
	admin := githubfake.Person{Login: "owner", ID: 15, Sees: []int64{621},
		Memberships: map[string]githubfake.Membership{"acme": {State: "active", Role: "admin"}}}
	if res := s.callbackAs(t, s.owner, state, 621, s.fake.PersonCode(admin)); res.Status != http.StatusSeeOther ||
		!strings.HasSuffix(res.Header.Get("Location"), "/organization/code-host?installation=connected") {
		t.Fatalf("the organization's admin: %d %s %s", res.Status, res.Header.Get("Location"), res.Body)
	}

	// A personal account: only its own person.
	s.fake.AddInstallation(githubfake.Installation{ID: 623, AccountLogin: "octocat", AccountID: 583231, AccountType: "User"})
	personal := s.env.WithOrganization("personal")
	state = s.startState(t, personal)
	someoneElse := githubfake.Person{Login: "collaborator", ID: 777, Sees: []int64{623}}
	if res := s.callbackAs(t, personal, state, 623, s.fake.PersonCode(someoneElse)); res.Code() != "GITHUB_INSTALLER_UNVERIFIED" {
		t.Fatalf("someone else on a personal account: %d %s", res.Status, res.Body)
	}
	octocat := githubfake.Person{Login: "octocat", ID: 583231, Sees: []int64{623}}
	if res := s.callbackAs(t, personal, state, 623, s.fake.PersonCode(octocat)); res.Status != http.StatusSeeOther {
		t.Fatalf("the account's own person: %d %s", res.Status, res.Body)
	}
}

// TestArchiveDownloadKeepsTheTokenOnTheAPIHost: the provider redirects the
// tarball request to a signed URL on another host; the download there
// succeeds without the installation token, which only the API host
// receives.
func TestArchiveDownloadKeepsTheTokenOnTheAPIHost(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 841, 6401)
	wsID := s.workspace(t, "archive")
	s.source(t, wsID, map[string]any{"repository_id": 6401, "tracked_branch": "main", "working_directory": "infra"}).
		MustStatus(t, http.StatusCreated)
	sha := s.fake.Commit(6401, "main", "archive", mainTF())
	var push deliveryDoc
	s.deliver(t, githubfake.NewDelivery("push", s.fake.Push(t, 841, 6401, githubfake.PushOptions{Branch: "main",
		Before: strings.Repeat("4", 40), After: sha, Paths: [][]string{{"infra/main.tf"}}}))).MustStatus(t, http.StatusOK).Data(t, &push)
	if err := s.env.Server.Services().GitHub.Ingest(context.Background(), push.IngestionIDs[0]); err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, `SELECT count(*) FROM source_ingestions WHERE id = $1 AND status = 'ready'`, push.IngestionIDs[0]); n != 1 {
		t.Fatal("the ingestion did not end ready")
	}
	if strings.Split(s.fake.URL, ":")[1] == strings.Split(s.fake.CodeloadURL, ":")[1] {
		t.Fatalf("the download host %s is the API host %s", s.fake.CodeloadURL, s.fake.URL)
	}
	seen := s.fake.CodeloadAuthorizations()
	if len(seen) == 0 || s.fake.Calls(githubfake.RouteTarball) == 0 {
		t.Fatalf("the archive did not go through the redirect: %d downloads", len(seen))
	}
	for _, auth := range seen {
		if auth != "" {
			t.Fatalf("the download host received an Authorization header")
		}
	}
}
