package site

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/clientaddr"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// restrictedDownload is one guarded raw download of SPEC §4 rule 3: a POST
// with a reason, after a step-up, through the API's restricted endpoint.
type restrictedDownload struct {
	Kind  string // the dashboard's path segment
	Label string
	// File is the name the browser saves it as.
	File string
	// Needs are the permissions the API requires besides
	// artifact:read_sensitive; the page offers only what the caller has.
	Needs []access.Permission
}

// restrictedKinds maps the dashboard's download kinds to the API's
// restricted download operations on the run ("state" is the state version
// the run published, downloaded through its own operation).
var restrictedKinds = map[string]string{
	"plan":            "/downloads/plan",
	"plan-json":       "/downloads/plan-json",
	"emergency-state": "/downloads/emergency-state",
	"state":           "",
}

// downloads is the run page's downloads section.
type downloads struct {
	// Redacted offers the plan-diff artifact (artifact readers).
	Redacted bool
	// Restricted are the guarded raw downloads the caller may ask for.
	Restricted []restrictedDownload
	// Unavailable says the caller's permissions could not be read, so
	// what is downloadable is unknown: the section says so instead of
	// vanishing as if nothing were.
	Unavailable bool
}

// downloadsOf decides the downloads section: nil when nothing is
// downloadable.
func (s *Site) downloadsOf(ctx context.Context, token string, r runReview) *downloads {
	c, err := s.caller(ctx, token)
	if err != nil {
		return &downloads{Unavailable: true}
	}
	perms := c.perms
	if !perms.Has(access.PermRunRead) {
		return nil
	}
	d := &downloads{Redacted: r.Plan.Status == "finished"}
	if perms.Has(access.PermArtifactReadSensitive) {
		if r.Plan.Status == "finished" {
			d.Restricted = append(d.Restricted,
				restrictedDownload{Kind: "plan", Label: "Raw plan (binary plan file)", File: r.ID + ".tfplan"},
				restrictedDownload{Kind: "plan-json", Label: "Plan JSON (unredacted)", File: r.ID + "-plan.json"})
		}
		if r.Apply.StateVersionID != nil && perms.Has(access.PermStateRead) {
			d.Restricted = append(d.Restricted, restrictedDownload{Kind: "state", Label: "Raw state this run published", File: r.ID + ".tfstate",
				Needs: []access.Permission{access.PermStateRead}})
		}
		if r.Apply.EmergencyStateDigest != nil && perms.Has(access.PermStateRecover) {
			d.Restricted = append(d.Restricted, restrictedDownload{Kind: "emergency-state", Label: "Emergency state the apply left",
				File: r.ID + "-emergency.tfstate", Needs: []access.Permission{access.PermStateRecover}})
		}
	}
	if !d.Redacted && len(d.Restricted) == 0 {
		return nil
	}
	return d
}

// redactedPlan streams the plan-diff artifact as a file: the redacted plan
// every artifact reader may have.
func (s *Site) redactedPlan(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	f := s.frame(r, "Download")
	if err := s.probe(r.Context(), token, "/runs/"+url.PathEscape(id)); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	resp, err := s.api.Stream(r.Context(), token, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/plan-changes", "", nil, "Accept", "application/json")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeFile(id)+`-plan-redacted.json"`)
	w.Header().Set("Cache-Control", "private, no-store")
	_, _ = io.Copy(w, resp.Body)
}

// restricted streams a guarded raw download: the reason goes to the API,
// which audits it before the first byte; the password first renews the
// session's step-up. Any query string is refused before anything else, as
// the API refuses it.
func (s *Site) restricted(w http.ResponseWriter, r *http.Request, token string) {
	id, kind := r.PathValue("id"), r.PathValue("kind")
	suffix, ok := restrictedKinds[kind]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.URL.RawQuery != "" {
		http.Error(w, "Restricted downloads take no query string.", http.StatusBadRequest)
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if n := len([]rune(reason)); n < 1 || n > 500 {
		s.renderRunPage(w, r, token, runPage{Notice: "Give a reason of 1–500 characters for the download."})
		return
	}
	if err := s.stepUp(r, token); err != nil {
		s.renderRunPage(w, r, token, runPage{Notice: stepUpRefusal(err)})
		return
	}
	path := "/v1/runs/" + url.PathEscape(id) + suffix
	if kind == "state" {
		var review runReview
		if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &review); err != nil || review.Apply.StateVersionID == nil {
			s.renderRunPage(w, r, token, runPage{Notice: "That artifact is not available."})
			return
		}
		path = "/v1/state-versions/" + url.PathEscape(*review.Apply.StateVersionID) + "/download"
	}
	form := url.Values{"reason": {reason}}.Encode()
	resp, err := s.api.Stream(r.Context(), token, http.MethodPost, path, "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		s.renderRunPage(w, r, token, runPage{Notice: downloadRefusal(err)})
		return
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	if n := resp.Header.Get("Content-Length"); n != "" {
		w.Header().Set("Content-Length", n)
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeFile(id)+"-"+kind+`"`)
	w.Header().Set("Cache-Control", "private, no-store")
	_, _ = io.Copy(w, resp.Body)
}

// stepUp re-enters the password the form carried: the API then counts the
// session as freshly authenticated for restricted operations.
func (s *Site) stepUp(r *http.Request, token string) error {
	password := r.PostFormValue("password")
	if password == "" {
		return errNoPassword
	}
	return s.api.CallFor(r.Context(), clientaddr.FromRequest(r, s.opts.TrustedProxies), token, http.MethodPost,
		"/api/auth/reauthenticate", map[string]string{"password": password}, nil)
}

var errNoPassword = errors.New("no password given")

func stepUpRefusal(err error) string {
	switch {
	case errors.Is(err, errNoPassword):
		return "Enter your password to confirm it is you."
	case apiclient.StatusOf(err) == http.StatusTooManyRequests:
		return "Too many password attempts. Wait a minute and try again."
	}
	return "That password is not right; nothing was done."
}

func downloadRefusal(err error) string {
	switch {
	case apiclient.CodeOf(err) == "REAUTHENTICATION_REQUIRED":
		return "Confirm your password again: the download needs a sign-in from the last 15 minutes."
	case apiclient.StatusOf(err) == http.StatusForbidden:
		return "You do not have permission for that download."
	case apiclient.StatusOf(err) == http.StatusNotFound:
		return "That artifact is not available."
	}
	return refusal(err)
}

// safeFile keeps an ID usable as a file name.
func safeFile(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, id)
}
