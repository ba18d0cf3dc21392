package modulesv1

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/config"
)

const testSecret = config.Secret("modulesv1-test-secret-0123456789abcdef0123")

func TestArchiveGrantIsBoundToWhatItWasSignedFor(t *testing.T) {
	t.Parallel()
	signer := capability.NewSigner(testSecret)
	now := time.Unix(1_800_000_000, 0)
	g := archiveGrant{OrganizationID: "org_a", ModuleID: "mod_b", VersionID: "modv_c",
		SHA256: strings.Repeat("ab", 32)}
	token := signGrant(signer, g, now.Add(time.Hour))
	if got, ok := openGrant(signer, token, now); !ok || got != g {
		t.Fatalf("a fresh grant opened as %+v, %v", got, ok)
	}
	if _, ok := openGrant(signer, token, now.Add(time.Hour)); !ok {
		t.Fatal("a grant is refused at its last second")
	}
	fields := strings.Split(token, ".")
	swap := func(i int, v string) string {
		f := append([]string{}, fields...)
		f[i] = v
		return strings.Join(f, ".")
	}
	for name, tok := range map[string]string{
		"expired":           token,
		"another org":       swap(0, "org_x"),
		"another module":    swap(1, "mod_x"),
		"another version":   swap(2, "modv_x"),
		"another digest":    swap(3, strings.Repeat("ba", 32)),
		"a later expiry":    swap(4, "1800009999"),
		"another signature": swap(5, strings.Repeat("A", len(fields[5]))),
		"a missing field":   strings.Join(fields[1:], "."),
		"an extra field":    token + ".x",
		"an empty field":    swap(1, ""),
		"nothing":           "",
		"another key":       signGrant(capability.NewSigner(testSecret+"x"), g, now.Add(time.Hour)),
		"a keyless signer":  signGrant(capability.Signer{}, g, now.Add(time.Hour)),
	} {
		at := now
		if name == "expired" {
			at = now.Add(time.Hour + time.Second)
		}
		if _, ok := openGrant(signer, tok, at); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	// Every single byte of the token matters.
	for i := range token {
		b := []byte(token)
		b[i] ^= 1
		if _, ok := openGrant(signer, string(b), now); ok {
			t.Errorf("the token with byte %d changed is accepted", i)
		}
	}
}
