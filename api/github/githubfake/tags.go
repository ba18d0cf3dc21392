package githubfake

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Tag points a lightweight tag of a repository at a commit (creating or
// moving it), as `git tag -f NAME SHA && git push -f` does.
func (s *Server) Tag(repoID int64, name, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.repos[repoID]; r != nil {
		r.Tags[name] = sha
	}
}

// TagPush is the real push payload of a created tag, retargeted at a
// repository of the fake: the ref is refs/tags/NAME, before is all zeros,
// after is the commit the tag names, and no commits are listed.
func (s *Server) TagPush(t T, installationID, repoID int64, name, sha string) []byte {
	t.Helper()
	repo := s.repoFor(t, repoID)
	var m map[string]any
	for _, e := range Examples(t, "push") {
		m = nil
		if err := json.Unmarshal(e.Payload, &m); err != nil {
			t.Fatal(err)
		}
		if ref, _ := m["ref"].(string); strings.HasPrefix(ref, "refs/tags/") && m["created"] == true {
			break
		}
	}
	if m == nil || m["created"] != true {
		t.Fatal("no created-tag push example")
	}
	retarget(m, repo, installationID)
	m["ref"], m["after"] = "refs/tags/"+name, sha
	m["compare"] = "https://github.com/" + repo.FullName() + "/compare/" + name
	if hc, ok := m["head_commit"].(map[string]any); ok {
		hc["id"] = sha
	}
	return mustJSON(t, m)
}

// GET /repos/{owner}/{repo}/tags, paginated (30 a page by default), as
// the provider lists them: newest tag name first is not promised, so the
// fake lists them by name.
func (s *Server) tags(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := s.RepositoryOf(w, r, id)
	if !ok {
		return
	}
	tags := s.tagsOf(repo.ID)
	names := make([]string, 0, len(tags))
	for n := range tags {
		names = append(names, n)
	}
	sort.Strings(names)
	_, lo, hi := paginate(w, r, len(names), 30)
	base := s.URL + "/repos/" + repo.FullName()
	items := make([]any, 0, hi-lo)
	for _, n := range names[lo:hi] {
		sha := tags[n]
		items = append(items, map[string]any{"name": n, "zipball_url": base + "/zipball/refs/tags/" + n,
			"tarball_url": base + "/tarball/refs/tags/" + n, "node_id": "REF_" + sha[:12],
			"commit": map[string]any{"sha": sha, "url": base + "/commits/" + sha}})
	}
	writeJSON(w, http.StatusOK, items)
}

// GET /repos/{owner}/{repo}/git/ref/{ref}: one reference ("tags/NAME" or
// "heads/BRANCH") and the object it points at.
func (s *Server) gitRef(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := s.RepositoryOf(w, r, id)
	if !ok {
		return
	}
	ref := r.PathValue("ref")
	var sha string
	s.mu.Lock()
	if name, ok := strings.CutPrefix(ref, "tags/"); ok {
		sha = s.repos[repo.ID].Tags[name]
	} else if name, ok := strings.CutPrefix(ref, "heads/"); ok {
		sha = s.repos[repo.ID].Refs[name]
	}
	s.mu.Unlock()
	if sha == "" {
		notFound(w)
		return
	}
	base := s.URL + "/repos/" + repo.FullName()
	writeJSON(w, http.StatusOK, map[string]any{"ref": "refs/" + ref, "node_id": "REF_" + sha[:12],
		"url":    base + "/git/refs/" + ref,
		"object": map[string]any{"sha": sha, "type": "commit", "url": base + "/git/commits/" + sha}})
}

// tagsOf copies a repository's tags under the lock.
func (s *Server) tagsOf(repoID int64) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.repos[repoID].Tags {
		out[k] = v
	}
	return out
}
