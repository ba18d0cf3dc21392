package githubfake_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"

	"github.com/cairnhq/cairn/api/archive"
	"github.com/cairnhq/cairn/api/github/githubfake"
)

// TestFakePlaysTheProvider: the real clients exchange an app JWT for an
// installation token, read the installation, the repository, a commit,
// paginated pull-request files, and download a tarball our archive rules
// accept; a lost response and a temporary failure behave as injected.
func TestFakePlaysTheProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := githubfake.Start(t)
	f.AddRepository(githubfake.Repository{ID: 11, Owner: "acme", Name: "infra"})
	f.AddInstallation(githubfake.Installation{ID: 7, AccountLogin: "acme", Repositories: []int64{11}})
	sha := f.Commit(11, "main", "first", map[string]string{"main.tf": "terraform {}\n", "mod/a.tf": "# a\n"})

	apps, err := ghinstallation.NewAppsTransport(http.DefaultTransport, f.AppID, f.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	apps.BaseURL = f.URL
	appClient := github.NewClient(&http.Client{Transport: apps})
	appClient.BaseURL, _ = url.Parse(f.URL + "/")
	in, _, err := appClient.Apps.GetInstallation(ctx, 7)
	if err != nil || in.GetAccount().GetLogin() != "acme" {
		t.Fatalf("installation: %v %+v", err, in)
	}

	itr := ghinstallation.NewFromAppsTransport(apps, 7)
	itr.BaseURL = f.URL
	c := github.NewClient(&http.Client{Transport: itr})
	c.BaseURL, _ = url.Parse(f.URL + "/")
	commit, _, err := c.Repositories.GetCommit(ctx, "acme", "infra", "main", nil)
	if err != nil || commit.GetSHA() != sha {
		t.Fatalf("commit: %v %v", err, commit.GetSHA())
	}
	f.SetPullFiles(11, 3, []string{"a", "b", "c", "d", "e"})
	var files []string
	opt := &github.ListOptions{PerPage: 2}
	for {
		page, resp, err := c.PullRequests.ListFiles(ctx, "acme", "infra", 3, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			files = append(files, p.GetFilename())
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(files) != 5 {
		t.Fatalf("paginated files: %v", files)
	}

	resp, err := (&http.Client{Transport: itr}).Get(f.URL + "/repos/acme/infra/tarball/" + sha)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("tarball: %v %v", err, resp)
	}
	m, err := archive.Inspect(ctx, resp.Body, archive.DefaultLimits())
	resp.Body.Close()
	if err != nil || m.Files != 2 {
		t.Fatalf("archive: %v %+v", err, m)
	}

	f.Inject(githubfake.RouteInstallation, githubfake.Fault{Status: 502})
	if _, _, err := appClient.Apps.GetInstallation(ctx, 7); err == nil {
		t.Fatal("injected 502 did not fail")
	}
	if _, _, err := appClient.Apps.GetInstallation(ctx, 7); err != nil {
		t.Fatalf("after faults: %v", err)
	}
	// A lost token exchange: the fake issued a token the caller never saw.
	issued := f.TokensIssued()
	f.Inject(githubfake.RouteAccessToken, githubfake.Fault{Lose: true})
	fresh := ghinstallation.NewFromAppsTransport(apps, 7)
	fresh.BaseURL = f.URL
	if _, err := fresh.Token(ctx); err == nil {
		t.Fatal("lost response did not fail")
	}
	if f.TokensIssued() != issued+1 {
		t.Fatalf("the lost exchange did not act: %d tokens", f.TokensIssued())
	}

	// A forged app JWT gets no token.
	bad, _ := http.NewRequest(http.MethodPost, f.URL+"/app/installations/7/access_tokens", nil)
	bad.Header.Set("Authorization", "Bearer a.b.c")
	r2, err := http.DefaultClient.Do(bad)
	if err != nil || r2.StatusCode != 401 {
		t.Fatalf("forged JWT: %v %v", err, r2)
	}
	_, _ = io.Copy(io.Discard, r2.Body)
	r2.Body.Close()

	if len(githubfake.Examples(t, "push")) == 0 {
		t.Fatal("no push examples")
	}
}

// TestFakeTags: the real client lists a repository's tags page by page,
// reads a tag's ref, and downloads the tarball of a tag; a tag push
// payload names the tag and its commit.
func TestFakeTags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := githubfake.Start(t)
	f.AddRepository(githubfake.Repository{ID: 12, Owner: "acme", Name: "modules"})
	f.AddInstallation(githubfake.Installation{ID: 8, AccountLogin: "acme", Repositories: []int64{12}})
	sha := f.Commit(12, "main", "first", map[string]string{"net/main.tf": "# net\n"})
	for _, tag := range []string{"net/v1.0.0", "v0.1.0", "not-a-version"} {
		f.Tag(12, tag, sha)
	}
	apps, err := ghinstallation.NewAppsTransport(http.DefaultTransport, f.AppID, f.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	apps.BaseURL = f.URL
	itr := ghinstallation.NewFromAppsTransport(apps, 8)
	itr.BaseURL = f.URL
	c := github.NewClient(&http.Client{Transport: itr})
	c.BaseURL, _ = url.Parse(f.URL + "/")
	var names []string
	opt := &github.ListOptions{PerPage: 2}
	for {
		page, resp, err := c.Repositories.ListTags(ctx, "acme", "modules", opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range page {
			if tag.GetCommit().GetSHA() != sha {
				t.Fatalf("tag %s names %s", tag.GetName(), tag.GetCommit().GetSHA())
			}
			names = append(names, tag.GetName())
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(names) != 3 {
		t.Fatalf("tags: %v", names)
	}
	ref, _, err := c.Git.GetRef(ctx, "acme", "modules", "tags/net/v1.0.0")
	if err != nil || ref.GetRef() != "refs/tags/net/v1.0.0" || ref.GetObject().GetSHA() != sha || ref.GetObject().GetType() != "commit" {
		t.Fatalf("ref: %v %+v", err, ref)
	}
	if _, resp, err := c.Git.GetRef(ctx, "acme", "modules", "tags/v9.9.9"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("missing tag: %v", err)
	}
	resp, err := (&http.Client{Transport: itr}).Get(f.URL + "/repos/acme/modules/tarball/refs/tags/v0.1.0")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("tarball of a tag: %v %v", err, resp)
	}
	resp.Body.Close()
	var push struct {
		Ref     string `json:"ref"`
		After   string `json:"after"`
		Created bool   `json:"created"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal(f.TagPush(t, 8, 12, "v0.1.0", sha), &push); err != nil || push.Ref != "refs/tags/v0.1.0" ||
		push.After != sha || !push.Created || push.Deleted {
		t.Fatalf("tag push: %v %+v", err, push)
	}
}
