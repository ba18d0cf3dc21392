package site

import "testing"

func TestCommitLinksFollowTheCodeHost(t *testing.T) {
	t.Parallel()
	sha := "0123456789abcdef0123456789abcdef01234567"
	for api, want := range map[string]string{
		"https://api.github.com":         "https://github.com/acme/infra/commit/" + sha,
		"https://ghe.example.com/api/v3": "https://ghe.example.com/acme/infra/commit/" + sha,
		"http://127.0.0.1:4100":          "http://127.0.0.1:4100/acme/infra/commit/" + sha,
		"javascript:alert(1)":            "",
		"":                               "",
	} {
		src := runSource{CommitSHA: sha, Repository: "acme/infra", web: CodeHostWebURL(api)}
		if got := src.CommitURL(); got != want {
			t.Errorf("API %q: commit link %q, want %q", api, got, want)
		}
	}
	// A malformed SHA or repository links nowhere.
	for _, src := range []runSource{{CommitSHA: "HEAD", Repository: "acme/infra"}, {CommitSHA: sha, Repository: "infra"}} {
		src.web = "https://github.com"
		if got := src.CommitURL(); got != "" {
			t.Errorf("%+v links to %q", src, got)
		}
	}
}
