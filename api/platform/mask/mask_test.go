package mask

import (
	"encoding/base64"
	"net/url"
	"slices"
	"testing"
)

func TestFormsCoverEverySpelling(t *testing.T) {
	t.Parallel()
	secret := "p@ss w/rd\"+?é"
	forms := Forms([]string{secret, "", secret})
	for _, want := range []string{
		secret,
		`p@ss w/rd\"+?é`,
		base64.RawStdEncoding.EncodeToString([]byte(secret)),
		base64.RawURLEncoding.EncodeToString([]byte(secret)),
		url.QueryEscape(secret),
		url.PathEscape(secret),
	} {
		if !slices.Contains(forms, want) {
			t.Errorf("forms %q lack %q", forms, want)
		}
	}
	seen := map[string]bool{}
	for _, f := range forms {
		if f == "" || seen[f] {
			t.Fatalf("empty or repeated form %q in %q", f, forms)
		}
		seen[f] = true
	}
	if got := Forms([]string{"x"}); !slices.Contains(got, "x") || !slices.Contains(got, "eA") {
		t.Fatalf("a one-byte secret is not masked in all its forms: %q", got)
	}
	if len(Forms([]string{""})) != 0 {
		t.Fatal("an empty secret has forms")
	}
}
