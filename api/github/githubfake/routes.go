package githubfake

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Route patterns, for Inject, Hook and Calls.
const (
	RouteAccessToken  = "POST /app/installations/{id}/access_tokens"
	RouteInstallation = "GET /app/installations/{id}"
	RouteRepositories = "GET /installation/repositories"
	RouteRepository   = "GET /repos/{owner}/{repo}"
	RouteCommit       = "GET /repos/{owner}/{repo}/commits/{ref}"
	RouteTarball      = "GET /repos/{owner}/{repo}/tarball/{ref...}"
	RouteCodeload     = "GET /{owner}/{repo}/legacy.tar.gz/{sha}"
	RoutePullFiles    = "GET /repos/{owner}/{repo}/pulls/{number}/files"
	RouteTags         = "GET /repos/{owner}/{repo}/tags"
	RouteGitRef       = "GET /repos/{owner}/{repo}/git/ref/{ref...}"
)

func (s *Server) routes() {
	s.Handle(RouteAccessToken, s.accessToken)
	s.Handle(RouteInstallation, s.installation)
	s.Handle(RouteRepositories, s.repositories)
	s.Handle(RouteRepository, s.repository)
	s.Handle(RouteCommit, s.commit)
	s.Handle(RouteTarball, s.tarball)
	s.cmux.Handle(RouteCodeload, s.wrap(RouteCodeload, s.codeload))
	s.Handle(RoutePullFiles, s.pullFiles)
	s.Handle(RouteTags, s.tags)
	s.Handle(RouteGitRef, s.gitRef)
	s.Handle(RouteOAuthToken, s.oauthToken)
	s.Handle(RouteUserInstallations, s.userInstallations)
	s.Handle(RouteUser, s.user)
	s.Handle(RouteUserMembership, s.userMembership)
}

func (s *Server) appInstallation(w http.ResponseWriter, r *http.Request) (*Installation, bool) {
	if err := s.verifyAppJWT(r); err != nil {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "A JSON web token could not be decoded",
			"documentation_url": "https://docs.github.com/rest"})
		return nil, false
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	in := s.installations[id]
	var c Installation
	if in != nil {
		c = *in
	}
	s.mu.Unlock()
	if err != nil || in == nil {
		notFound(w)
		return nil, false
	}
	return &c, true
}

// POST /app/installations/{id}/access_tokens, as the provider answers it.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	in, ok := s.appInstallation(w, r)
	if !ok {
		return
	}
	if in.Suspended {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "This installation has been suspended",
			"documentation_url": "https://docs.github.com/rest"})
		return
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	tok := "ghs_" + hex.EncodeToString(b)
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	s.mu.Lock()
	s.tokens[tok] = token{installationID: in.ID, expires: expires}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"token": tok, "expires_at": expires.Format(time.RFC3339),
		"permissions":          TokenPermissions(),
		"repository_selection": "selected",
	})
}

// TokenPermissions are the permissions the fake's installation tokens
// carry: the app's, as the provider reports them.
func TokenPermissions() map[string]string {
	return map[string]string{"metadata": "read", "contents": "read", "pull_requests": "read", "checks": "write"}
}

// installationJSON is the provider's installation object.
func (s *Server) installationJSON(in Installation) map[string]any {
	var suspended any
	if in.Suspended {
		suspended = "2026-01-01T00:00:00Z"
	}
	return map[string]any{
		"id": in.ID,
		"account": map[string]any{"login": in.AccountLogin, "id": in.AccountID, "type": in.AccountType,
			"node_id": "O_" + strconv.FormatInt(in.AccountID, 10), "site_admin": false},
		"repository_selection": "selected",
		"access_tokens_url":    fmt.Sprintf("%s/app/installations/%d/access_tokens", s.URL, in.ID),
		"repositories_url":     s.URL + "/installation/repositories",
		"app_id":               s.AppID, "app_slug": "cairn-test", "target_id": in.AccountID, "target_type": in.AccountType,
		"permissions": TokenPermissions(), "events": []string{"pull_request", "push"},
		"created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z",
		"single_file_name": nil, "suspended_by": nil, "suspended_at": suspended,
	}
}

// GET /app/installations/{id}
func (s *Server) installation(w http.ResponseWriter, r *http.Request) {
	in, ok := s.appInstallation(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.installationJSON(*in))
}

func (s *Server) repositoryJSON(repo Repository) map[string]any {
	return map[string]any{
		"id": repo.ID, "node_id": "R_" + strconv.FormatInt(repo.ID, 10), "name": repo.Name, "full_name": repo.FullName(),
		"private": repo.Private, "default_branch": repo.DefaultBranch, "fork": false,
		"owner":    map[string]any{"login": repo.Owner, "id": repo.OwnerID, "type": "Organization"},
		"html_url": "https://github.com/" + repo.FullName(),
		"url":      s.URL + "/repos/" + repo.FullName(),
	}
}

// GET /installation/repositories, paginated as the provider paginates.
func (s *Server) repositories(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	var repos []Repository
	for _, rid := range s.installations[id].Repositories {
		if repo := s.repos[rid]; repo != nil {
			repos = append(repos, *repo)
		}
	}
	s.mu.Unlock()
	sort.Slice(repos, func(i, j int) bool { return repos[i].ID < repos[j].ID })
	page, lo, hi := paginate(w, r, len(repos), 30)
	items := make([]any, 0, hi-lo)
	for _, repo := range repos[lo:hi] {
		items = append(items, s.repositoryJSON(repo))
	}
	_ = page
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(repos), "repository_selection": "selected",
		"repositories": items})
}

// GET /repos/{owner}/{repo}
func (s *Server) repository(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := s.RepositoryOf(w, r, id)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.repositoryJSON(repo))
}

// resolve finds a commit of the repository by full SHA or branch name.
func (s *Server) resolve(repo Repository, ref string) (*Commit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sha, ok := repo.Refs[strings.TrimPrefix(ref, "refs/heads/")]; ok {
		ref = sha
	} else if sha, ok := repo.Tags[strings.TrimPrefix(strings.TrimPrefix(ref, "refs/"), "tags/")]; ok {
		ref = sha
	}
	c := s.commits[ref]
	if c == nil || c.RepoID != repo.ID {
		return nil, false
	}
	return c, true
}

// GET /repos/{owner}/{repo}/commits/{ref}
func (s *Server) commit(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := s.RepositoryOf(w, r, id)
	if !ok {
		return
	}
	c, ok := s.resolve(repo, r.PathValue("ref"))
	if !ok {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "No commit found for SHA: " + r.PathValue("ref"),
			"documentation_url": "https://docs.github.com/rest/commits/commits#get-a-commit"})
		return
	}
	author := map[string]any{"name": "Octo Cat", "email": "octocat@example.com", "date": "2026-01-01T00:00:00Z"}
	writeJSON(w, http.StatusOK, map[string]any{
		"sha": c.SHA, "node_id": "C_" + c.SHA[:12],
		"commit":   map[string]any{"message": c.Message, "author": author, "committer": author, "tree": map[string]any{"sha": c.SHA}},
		"url":      s.URL + "/repos/" + repo.FullName() + "/commits/" + c.SHA,
		"html_url": "https://github.com/" + repo.FullName() + "/commit/" + c.SHA,
		"parents":  []any{},
	})
}

// GET /repos/{owner}/{repo}/tarball/{ref}: the provider answers with a
// redirect to a short-lived download URL on another host, signed by a
// token in its query: the download itself needs no credential.
func (s *Server) tarball(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := s.RepositoryOf(w, r, id)
	if !ok {
		return
	}
	c, ok := s.resolve(repo, r.PathValue("ref"))
	if !ok {
		notFound(w)
		return
	}
	signed := randomHex()
	s.mu.Lock()
	s.downloads[signed] = c.SHA
	s.mu.Unlock()
	http.Redirect(w, r, fmt.Sprintf("%s/%s/%s/legacy.tar.gz/%s?token=%s", s.CodeloadURL, url.PathEscape(repo.Owner),
		url.PathEscape(repo.Name), c.SHA, signed), http.StatusFound)
}

// GET {CodeloadURL}/{owner}/{repo}/legacy.tar.gz/{sha}?token=...: the
// archive itself, as git archive writes it: a pax global header carrying
// the commit, then everything under one "owner-repo-shortsha/" directory.
// The signed token in the query is the only credential; every
// Authorization header it receives is recorded (CodeloadAuthorizations).
func (s *Server) codeload(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	s.mu.Lock()
	s.codeloadAuth = append(s.codeloadAuth, r.Header.Get("Authorization"))
	signedFor, signed := s.downloads[r.URL.Query().Get("token")]
	c := s.commits[sha]
	var repo *Repository
	if c != nil {
		repo = s.repos[c.RepoID]
	}
	s.mu.Unlock()
	if !signed || signedFor != sha || c == nil || repo == nil {
		notFound(w)
		return
	}
	body, declared := c.Archive, c.DeclaredBytes
	if body == nil {
		var err error
		if body, err = TarballWithLinks(repo.Owner+"-"+repo.Name+"-"+sha[:7], sha, c.Files, c.Links); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if declared == 0 {
		declared = int64(len(body))
	}
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%s-%s-%s.tar.gz", repo.Owner, repo.Name, sha[:7]))
	w.Header().Set("Content-Length", strconv.FormatInt(declared, 10))
	_, _ = w.Write(body)
}

// Tarball builds a gzip-compressed tar as git archive does for a commit.
func Tarball(prefix, sha string, files map[string]string) ([]byte, error) {
	return TarballWithLinks(prefix, sha, files, nil)
}

// TarballWithLinks is Tarball with symbolic links (path → target), which
// git archive writes as symlink entries after the files.
func TarballWithLinks(prefix, sha string, files, links map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{"comment": sha}, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	writeDir := func(d string) error {
		if dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix + "/" + d, Mode: 0o775, ModTime: mtime})
	}
	if err := writeDir(""); err != nil {
		return nil, err
	}
	for _, n := range names {
		parts := strings.Split(n, "/")
		for i := 1; i < len(parts); i++ {
			if err := writeDir(strings.Join(parts[:i], "/") + "/"); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: prefix + "/" + n, Mode: 0o664,
			Size: int64(len(files[n])), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return nil, err
		}
	}
	linkNames := make([]string, 0, len(links))
	for n := range links {
		linkNames = append(linkNames, n)
	}
	sort.Strings(linkNames)
	for _, n := range linkNames {
		parts := strings.Split(n, "/")
		for i := 1; i < len(parts); i++ {
			if err := writeDir(strings.Join(parts[:i], "/") + "/"); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: prefix + "/" + n, Linkname: links[n],
			Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// GET /repos/{owner}/{repo}/pulls/{number}/files, paginated (at most 100
// a page, 30 by default).
func (s *Server) pullFiles(w http.ResponseWriter, r *http.Request) {
	id, ok := s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := s.RepositoryOf(w, r, id)
	if !ok {
		return
	}
	number, _ := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	paths, found := s.pulls[pullKey(repo.ID, number)]
	s.mu.Unlock()
	if !found {
		notFound(w)
		return
	}
	_, lo, hi := paginate(w, r, len(paths), 30)
	items := make([]any, 0, hi-lo)
	for _, p := range paths[lo:hi] {
		items = append(items, map[string]any{"sha": strings.Repeat("0", 40), "filename": p, "status": "modified",
			"additions": 1, "deletions": 0, "changes": 1})
	}
	writeJSON(w, http.StatusOK, items)
}

// paginate reads page and per_page (capped at 100), writes the Link header
// the provider sends, and returns the page and its slice bounds.
func paginate(w http.ResponseWriter, r *http.Request, total, defaultSize int) (page, lo, hi int) {
	size, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if size <= 0 {
		size = defaultSize
	}
	size = min(size, 100)
	page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	lo = min((page-1)*size, total)
	hi = min(lo+size, total)
	last := max((total+size-1)/size, 1)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(size))
		return fmt.Sprintf(`<http://%s%s?%s>; rel="%s"`, r.Host, r.URL.Path, q.Encode(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return page, lo, hi
}

// CodeloadAuthorizations returns the Authorization header of every request
// the download host received, in order ("" where there was none).
func (s *Server) CodeloadAuthorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.codeloadAuth...)
}
