package modulesv1

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/platform/capability"
)

// archiveSuffix ends every signed archive path: go-getter, inside both
// CLIs, downloads a location with an archive suffix as one file and
// unpacks it, where any other location would be fetched as a directory.
const archiveSuffix = ".tar.gz"

// grantFields is how many dot-separated fields a grant token has: the four
// it is bound to, its expiry and its signature.
const grantFields = 6

// archiveGrant is what a signed archive URL is bound to: one version of one
// module of one organization, with the digest its archive was published
// with. IDs and the hex digest never contain a dot, which separates them in
// the token.
type archiveGrant struct {
	OrganizationID string
	ModuleID       string
	VersionID      string
	SHA256         string
}

// resource is what the signature covers besides the method and expiry.
func (g archiveGrant) resource() string {
	return "registry-module-archive\n" + g.OrganizationID + "\n" + g.ModuleID + "\n" + g.VersionID + "\n" + g.SHA256
}

// signGrant returns the token of a grant that ends at deadline. The grant is signed for GET and
// serves HEAD too: the CLIs' download client probes with HEAD first, and a
// grant good only once would die on the probe.
func signGrant(s capability.Signer, g archiveGrant, deadline time.Time) string {
	expires := capability.Expires(deadline)
	return strings.Join([]string{g.OrganizationID, g.ModuleID, g.VersionID, g.SHA256,
		strconv.FormatInt(expires, 10), s.Sign(http.MethodGet, g.resource(), expires)}, ".")
}

// openGrant checks a token from an archive path (without its suffix) at
// now: any change to any byte of it, or a passed expiry, refuses it.
func openGrant(s capability.Signer, token string, now time.Time) (archiveGrant, bool) {
	f := strings.Split(token, ".")
	if len(f) != grantFields {
		return archiveGrant{}, false
	}
	g := archiveGrant{OrganizationID: f[0], ModuleID: f[1], VersionID: f[2], SHA256: f[3]}
	for _, v := range f[:4] {
		if v == "" {
			return archiveGrant{}, false
		}
	}
	if !s.Valid(http.MethodGet, g.resource(), f[4], f[5], now) {
		return archiveGrant{}, false
	}
	return g, true
}
