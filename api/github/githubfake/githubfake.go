package githubfake

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is the fake code host. Its state is guarded by one mutex; the
// exported methods are safe to call while requests are served.
type Server struct {
	// URL is the API base URL to configure (no trailing slash).
	URL   string
	AppID int64
	// KeyPEM is the app's private key (PKCS#1 PEM), the one Cairn signs
	// its app JWTs with; the fake verifies them with its public half.
	KeyPEM []byte

	// CodeloadURL is the origin archive downloads are redirected to: a
	// second listener on another loopback host, as the provider's
	// codeload host is another host than its API.
	CodeloadURL string

	srv  *httptest.Server
	mux  *http.ServeMux
	cdn  *httptest.Server
	cmux *http.ServeMux
	key  *rsa.PrivateKey

	mu            sync.Mutex
	installations map[int64]*Installation
	repos         map[int64]*Repository
	commits       map[string]*Commit  // by SHA
	pulls         map[string][]string // "repoID#number" → changed paths
	tokens        map[string]token
	faults        map[string][]Fault
	hooks         map[string]func(*http.Request)
	calls         map[string]int
	codes         map[string]Person // authorization code → person
	users         map[string]Person // user token → person
	downloads     map[string]string // signed download token → commit SHA
	// codeloadAuth is every Authorization header the download host
	// received ("" for none), in order.
	codeloadAuth []string
}

// Installation is an app installation as the provider reports it.
type Installation struct {
	ID           int64
	AccountLogin string
	AccountID    int64
	AccountType  string
	Suspended    bool
	// Repositories are the IDs selected for the installation.
	Repositories []int64
}

// Repository is a repository the fake hosts.
type Repository struct {
	ID            int64
	Owner         string
	OwnerID       int64
	Name          string
	DefaultBranch string
	Private       bool
	// Refs maps a branch name to its head commit SHA.
	Refs map[string]string
	// Tags maps a tag name to the commit it names (lightweight tags).
	Tags map[string]string
}

// FullName is "owner/name".
func (r Repository) FullName() string { return r.Owner + "/" + r.Name }

// Commit is a commit and the whole tree at it.
type Commit struct {
	SHA     string
	RepoID  int64
	Message string
	Files   map[string]string
	// Links are symbolic links in the tree: path → target.
	Links map[string]string
	// Archive, when set, is served as the commit's download instead of an
	// archive of Files: a hostile or broken provider archive.
	Archive []byte
	// DeclaredBytes, when nonzero, is the Content-Length the download
	// declares whatever it sends.
	DeclaredBytes int64
}

type token struct {
	installationID int64
	expires        time.Time
}

// Fault is what a route does to its next request instead of answering
// normally.
type Fault struct {
	// Status, when nonzero, is answered (with a provider-shaped error
	// body) without acting.
	Status int
	// Lose acts normally and then drops the connection before any byte
	// of the response is written: the caller cannot know what happened.
	Lose bool
}

// T is what the payload helpers need of a test: testing.TB satisfies it,
// and the benchmark harness passes one that panics.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Start starts a fake code host for the test and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server.
func (s *Server) Close() {
	s.srv.Close()
	s.cdn.Close()
}

// New starts a fake code host outside a test (the benchmark harness);
// the caller closes it.
func New() (*Server, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating app key: %w", err)
	}
	s := &Server{
		AppID:         4242,
		KeyPEM:        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		mux:           http.NewServeMux(),
		key:           key,
		installations: map[int64]*Installation{},
		repos:         map[int64]*Repository{},
		commits:       map[string]*Commit{},
		pulls:         map[string][]string{},
		tokens:        map[string]token{},
		faults:        map[string][]Fault{},
		hooks:         map[string]func(*http.Request){},
		calls:         map[string]int{},
		codes:         map[string]Person{},
		users:         map[string]Person{},
		downloads:     map[string]string{},
		cmux:          http.NewServeMux(),
	}
	s.routes()
	s.srv = httptest.NewServer(s.mux)
	s.URL = s.srv.URL
	s.cdn = httptest.NewUnstartedServer(s.cmux)
	// Another host: 127.0.0.2 is loopback on Linux; elsewhere another port
	// of the same host has to do.
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		s.cdn.Listener.Close()
		s.cdn.Listener = l
	}
	s.cdn.Start()
	s.CodeloadURL = s.cdn.URL
	return s, nil
}

// Handle registers an extra route (a Go ServeMux pattern such as
// "POST /repos/{owner}/{repo}/check-runs") with the same fault injection,
// hooks and call counting as the built-in ones.
func (s *Server) Handle(pattern string, h http.HandlerFunc) {
	s.mux.Handle(pattern, s.wrap(pattern, h))
}

// Inject queues faults for the next requests of a route, named by the
// pattern it was registered with (for example "GET /app/installations/{id}").
func (s *Server) Inject(pattern string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[pattern] = append(s.faults[pattern], faults...)
}

// Hook runs fn before every answer of a route (after faults, before the
// handler reads state), until replaced or cleared with nil. Tests use it to
// race a lifecycle event against a read.
func (s *Server) Hook(pattern string, fn func(*http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fn == nil {
		delete(s.hooks, pattern)
		return
	}
	s.hooks[pattern] = fn
}

// Calls is how many requests a route received, faults included.
func (s *Server) Calls(pattern string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[pattern]
}

func (s *Server) wrap(pattern string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[pattern]++
		var f *Fault
		if q := s.faults[pattern]; len(q) > 0 {
			f = &q[0]
			s.faults[pattern] = q[1:]
		}
		hook := s.hooks[pattern]
		s.mu.Unlock()
		if f != nil && f.Status != 0 {
			writeJSON(w, f.Status, map[string]any{"message": http.StatusText(f.Status),
				"documentation_url": "https://docs.github.com/rest"})
			return
		}
		if hook != nil {
			hook(r)
		}
		if f != nil && f.Lose {
			rec := httptest.NewRecorder()
			h(rec, r)
			drop(w)
			return
		}
		h(w, r)
	})
}

// drop closes the client connection without a response.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// AddInstallation installs the app on an account.
func (s *Server) AddInstallation(in Installation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.AccountType == "" {
		in.AccountType = "Organization"
	}
	if in.AccountID == 0 {
		in.AccountID = in.ID + 1_000_000
	}
	c := in
	c.Repositories = append([]int64(nil), in.Repositories...)
	s.installations[in.ID] = &c
}

// UpdateInstallation changes an installation's state in place.
func (s *Server) UpdateInstallation(id int64, fn func(*Installation)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.installations[id]; ok {
		fn(in)
	}
}

// RemoveInstallation uninstalls the app: its tokens stop working.
func (s *Server) RemoveInstallation(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.installations, id)
}

// AddRepository adds a repository (not yet selected for any installation).
func (s *Server) AddRepository(r Repository) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	if r.OwnerID == 0 {
		r.OwnerID = r.ID + 2_000_000
	}
	c := r
	c.Refs, c.Tags = map[string]string{}, map[string]string{}
	for k, v := range r.Refs {
		c.Refs[k] = v
	}
	for k, v := range r.Tags {
		c.Tags[k] = v
	}
	s.repos[r.ID] = &c
}

// Commit records a commit of files on a branch of a repository, moves the
// branch to it and returns its 40-character SHA (derived from the content,
// so the same tree and message give the same SHA).
func (s *Server) Commit(repoID int64, branch, message string, files map[string]string) string {
	return s.CommitWithLinks(repoID, branch, message, files, nil)
}

// CommitWithLinks is Commit with symbolic links (path → target) in the
// tree besides the files.
func (s *Server) CommitWithLinks(repoID int64, branch, message string, files, links map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha1.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00", repoID, branch, message)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", n, files[n])
	}
	linkNames := make([]string, 0, len(links))
	for n := range links {
		linkNames = append(linkNames, n)
	}
	sort.Strings(linkNames)
	for _, n := range linkNames {
		fmt.Fprintf(h, "%s\x00->%s\x00", n, links[n])
	}
	if r := s.repos[repoID]; r != nil {
		fmt.Fprintf(h, "%s", r.Refs[branch]) // parent
	}
	sha := hex.EncodeToString(h.Sum(nil))
	c := &Commit{SHA: sha, RepoID: repoID, Message: message, Files: map[string]string{}, Links: map[string]string{}}
	for k, v := range files {
		c.Files[k] = v
	}
	for k, v := range links {
		c.Links[k] = v
	}
	s.commits[sha] = c
	if r := s.repos[repoID]; r != nil {
		r.Refs[branch] = sha
	}
	return sha
}

// CommitArchive records a commit on a branch whose download is exactly
// archive, declared as declared bytes (0: its real length), and returns
// its SHA. Tests use it for what a compromised or broken provider could
// send: links, traversing or duplicate names, a body over the limit.
func (s *Server) CommitArchive(repoID int64, branch, message string, archive []byte, declared int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha1.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d\x00", repoID, branch, message, declared)
	h.Write(archive)
	sha := hex.EncodeToString(h.Sum(nil))
	s.commits[sha] = &Commit{SHA: sha, RepoID: repoID, Message: message, Files: map[string]string{},
		Links: map[string]string{}, Archive: archive, DeclaredBytes: declared}
	if r := s.repos[repoID]; r != nil {
		r.Refs[branch] = sha
	}
	return sha
}

// SetPullFiles records the paths a pull request changes, as the
// changed-files endpoint lists them.
func (s *Server) SetPullFiles(repoID int64, number int, paths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[pullKey(repoID, number)] = append([]string(nil), paths...)
}

func pullKey(repoID int64, number int) string {
	return strconv.FormatInt(repoID, 10) + "#" + strconv.Itoa(number)
}

// TokensIssued counts installation tokens issued so far.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

// IssuedTokens are every installation access token and user token the
// fake has handed out: bearer secrets a test looks for where they must
// never be stored.
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tokens)+len(s.users))
	for tok := range s.tokens {
		out = append(out, tok)
	}
	for tok := range s.users {
		out = append(out, tok)
	}
	return out
}

// InstallationOf authenticates a request by its installation token and
// returns the installation, for routes registered with Handle. It writes
// the provider's 401 and returns false when the token is not live.
func (s *Server) InstallationOf(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	if !ok {
		raw, ok = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	s.mu.Lock()
	tok, found := s.tokens[raw]
	_, installed := s.installations[tok.installationID]
	s.mu.Unlock()
	if !ok || !found || !installed || time.Now().After(tok.expires) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials",
			"documentation_url": "https://docs.github.com/rest"})
		return 0, false
	}
	return tok.installationID, true
}

// RepositoryOf resolves {owner}/{repo} of the request among the
// repositories the installation is granted, answering 404 otherwise as the
// provider does.
func (s *Server) RepositoryOf(w http.ResponseWriter, r *http.Request, installationID int64) (Repository, bool) {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.installations[installationID]
	for _, id := range in.Repositories {
		if repo := s.repos[id]; repo != nil && strings.EqualFold(repo.Owner, owner) && strings.EqualFold(repo.Name, name) {
			return *repo, true
		}
	}
	notFound(w)
	return Repository{}, false
}

// verifyAppJWT checks the app's RS256 JSON Web Token as the provider does:
// signature by the app key, issuer the app ID, issued at most a minute in
// the future, expiring within ten minutes.
func (s *Server) verifyAppJWT(r *http.Request) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer token")
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &header); err != nil || header.Alg != "RS256" {
		return fmt.Errorf("bad JWT header")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("bad signature encoding")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat int64           `json:"iat"`
		Exp int64           `json:"exp"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return fmt.Errorf("bad claims")
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	now := time.Now().Unix()
	switch {
	case iss != strconv.FormatInt(s.AppID, 10):
		return fmt.Errorf("issuer %q is not the app", iss)
	case claims.Iat > now+60:
		return fmt.Errorf("issued in the future")
	case claims.Exp < now || claims.Exp > now+11*60:
		return fmt.Errorf("expired or too long-lived")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found",
		"documentation_url": "https://docs.github.com/rest"})
}
