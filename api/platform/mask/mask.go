package mask

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// Forms returns every spelling of every non-empty secret, each once. The
// base64 forms are unpadded: a padded encoding contains the unpadded one,
// so masking it leaves at most the padding. However short a secret is, its
// forms are included: a short secret masked everywhere costs a readable
// log, a short secret shown costs the secret.
func Forms(secrets []string) []string {
	var forms []string
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			forms = append(forms, f)
		}
	}
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		add(sec)
		quoted := strconv.Quote(sec)
		add(quoted[1 : len(quoted)-1])
		if enc, err := json.Marshal(sec); err == nil {
			add(string(enc[1 : len(enc)-1]))
		}
		add(base64.RawStdEncoding.EncodeToString([]byte(sec)))
		add(base64.RawURLEncoding.EncodeToString([]byte(sec)))
		add(url.QueryEscape(sec))
		add(url.PathEscape(sec))
	}
	return forms
}

// Contains reports whether s holds one of forms (from Forms). The forms
// include the JSON-escaped spelling, so raw JSON is searched as well as
// decoded text.
func Contains(s string, forms []string) bool {
	for _, f := range forms {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}
