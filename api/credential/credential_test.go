package credential_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
)

func TestSubjectIsStableAndFitsGoogle(t *testing.T) {
	t.Parallel()
	org, project, ws := id.New("org"), id.New("prj"), id.New("wks")
	seen := map[string]bool{}
	for _, phase := range []string{credential.RunPhasePlan, credential.RunPhaseApply, credential.RunPhaseSpeculativePlan} {
		sub, err := credential.Subject(org, project, ws, phase)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := credential.Subject(org, project, ws, phase)
		if sub != again || len(sub) > credential.MaxSubjectBytes || !strings.HasPrefix(sub, "organization:") ||
			!strings.HasSuffix(sub, ":run_phase:"+phase) || seen[sub] {
			t.Fatalf("subject %q (%d bytes)", sub, len(sub))
		}
		seen[sub] = true
	}
	if _, err := credential.Subject("my-org", project, ws, credential.RunPhasePlan); err == nil {
		t.Fatal("a name, not an ID, made a subject")
	}
	if _, err := credential.Subject(org, project, ws, "destroy"); err == nil {
		t.Fatal("an unknown phase made a subject")
	}
}

func TestParseEnvironmentChecksBeforeSealing(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]error{
		`{"environment":{"TF_VAR_pw":"x","API_KEY":"y"}}`:            nil,
		`{"environment":{"A":"a\u0000b"}}`:                           credential.ErrSecretValueInvalid,
		`{"environment":{"TF_VAR_":"x"}}`:                            credential.ErrConfigurationInvalid,
		`{"environment":{"tf_log":"x"}}`:                             credential.ErrConfigurationInvalid,
		`{"environment":{"LD_PRELOAD":"x"}}`:                         credential.ErrConfigurationInvalid,
		`{"environment":{"HOME":"x"}}`:                               credential.ErrConfigurationInvalid,
		`{"environment":{"A":1}}`:                                    credential.ErrConfigurationInvalid,
		`{"environment":{"A":"x"},"other":1}`:                        credential.ErrConfigurationInvalid,
		`{"environment":{"A":"x"}} {}`:                               credential.ErrConfigurationInvalid,
		`{"environment":{"A":"` + strings.Repeat("v", 70000) + `"}}`: credential.ErrEnvironmentTooLarge,
	} {
		env, err := credential.ParseEnvironment(json.RawMessage(body))
		if !errors.Is(err, want) || (want == nil && strings.Join(env.Names, ",") != "API_KEY,TF_VAR_pw") {
			t.Errorf("%.60s: %v (names %v), want %v", body, err, env.Names, want)
		}
		if err != nil && strings.Contains(err.Error(), "a\x00b") {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
	var names strings.Builder
	names.WriteString(`{"environment":{`)
	for i := range credential.MaxEnvironmentNames + 1 {
		if i > 0 {
			names.WriteString(",")
		}
		names.WriteString(`"N` + strings.Repeat("A", i+1) + `":"x"`)
	}
	names.WriteString(`}}`)
	if _, err := credential.ParseEnvironment(json.RawMessage(names.String())); !errors.Is(err, credential.ErrConfigurationInvalid) {
		t.Fatalf("33 names: %v", err)
	}
}

func TestSelectPinsOnlyUsableVersionsThatServeTheRun(t *testing.T) {
	t.Parallel()
	now := time.Now()
	version := func(provider, phase string, verified, disabled bool) *credential.Version {
		v := &credential.Version{ID: id.New("cpv"), ProfileID: id.New("cpr"), Provider: provider, Phase: phase}
		if provider == credential.ProviderGeneric {
			v.EnvironmentNames = []string{"TF_VAR_pw"}
		} else {
			v.Configuration = &credential.FederationJSON{}
		}
		if verified {
			v.VerifiedAt = &now
		}
		if disabled {
			v.DisabledAt = &now
		}
		return v
	}
	active := credential.Profile{ActivatedAt: &now}
	generic := credential.Candidate{Profile: active, Current: version(credential.ProviderGeneric, credential.PhasePlanAndApply, true, false)}
	aws := credential.Candidate{Profile: active, Current: version(credential.ProviderAWS, credential.PhasePlanAndApply, true, false)}
	awsSpeculative := credential.Candidate{Profile: active, Current: version(credential.ProviderAWS, credential.PhaseSpeculativePlan, true, false)}
	draft := credential.Candidate{Profile: credential.Profile{}, Current: nil}
	archived := credential.Candidate{Profile: credential.Profile{ActivatedAt: &now, ArchivedAt: &now}}
	revoked := credential.Candidate{Profile: active, Current: version(credential.ProviderAWS, credential.PhasePlanAndApply, true, true)}
	lost := credential.Candidate{Profile: active}

	for name, tc := range map[string]struct {
		candidates  []credential.Candidate
		speculative bool
		pinned      int
		reason      string
	}{
		"tracked run pins generic and federation": {[]credential.Candidate{generic, aws, draft, archived}, false, 2, ""},
		"revoked current version":                 {[]credential.Candidate{aws, revoked}, false, 0, credential.ReasonVersionUnavailable},
		"active profile without a version":        {[]credential.Candidate{lost}, false, 0, credential.ReasonVersionUnavailable},
		"speculative run with a generic secret":   {[]credential.Candidate{generic}, true, 0, credential.ReasonPhaseNotPermitted},
		"speculative run without its own version": {[]credential.Candidate{aws}, true, 0, credential.ReasonPhaseNotPermitted},
		"speculative run with its own version":    {[]credential.Candidate{aws, awsSpeculative}, true, 1, ""},
		"two versions set one name":               {[]credential.Candidate{generic, generic}, false, 0, credential.ReasonEnvironmentConflict},
	} {
		refs, reason := credential.Select(tc.candidates, tc.speculative)
		if reason != tc.reason || len(refs) != tc.pinned {
			t.Errorf("%s: %d pinned, reason %q", name, len(refs), reason)
		}
		for _, r := range refs {
			if tc.speculative && (r.Provider == credential.ProviderGeneric || r.Phase != credential.PhaseSpeculativePlan) {
				t.Errorf("%s: a speculative snapshot holds %+v", name, r)
			}
		}
	}
}

// TestSigningKeysRotateWithOverlap moves the issuer's clock through two
// signing periods: a successor is published before it signs, a retired key
// stays published while its tokens may live, and then leaves.
func TestSigningKeysRotateWithOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := dbtest.New(t)
	sealer, err := seal.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	at := func(d time.Duration) *credential.Issuer {
		return credential.NewIssuer(conn, sealer, "https://cairn.example").WithClock(func() time.Time { return t0.Add(d) })
	}
	kids := func(i *credential.Issuer) []string {
		keys, err := i.JWKS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range keys {
			out = append(out, k.KeyID)
		}
		return out
	}
	signedBy := func(i *credential.Issuer) string {
		token, err := i.Mint(ctx, credential.Claims{Subject: "s", Audience: "a"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
		var h struct{ Kid string }
		_ = json.Unmarshal(raw, &h)
		return h.Kid
	}

	first := signedBy(at(0))
	if got := kids(at(0)); len(got) != 1 || got[0] != first {
		t.Fatalf("first key set %v, signing %s", got, first)
	}
	// Within PublishAhead of retirement the successor is published but
	// the first key still signs.
	nearEnd := at(credential.SigningPeriod - credential.PublishAhead/2)
	if signer := signedBy(nearEnd); signer != first {
		t.Fatalf("signing with %s before the successor's time", signer)
	}
	both := kids(nearEnd)
	if len(both) != 2 || both[0] != first {
		t.Fatalf("no successor published ahead: %v", both)
	}
	// After retirement the successor signs; the retired key is still
	// published for the tokens it signed.
	after := at(credential.SigningPeriod + time.Hour)
	if signer := signedBy(after); signer != both[1] {
		t.Fatalf("signing with %s after retirement, want %s", signer, both[1])
	}
	if got := kids(after); len(got) != 2 {
		t.Fatalf("retired key unpublished too early: %v", got)
	}
	// Once no token it signed can be valid, it leaves the set.
	later := at(credential.SigningPeriod + credential.MaxTokenLifetime + 2*time.Hour)
	if err := later.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := kids(later); len(got) != 1 || got[0] != both[1] {
		t.Fatalf("key set after the grace %v", got)
	}
	// Without a master key nothing signs.
	if _, err := credential.NewIssuer(conn, nil, "https://cairn.example").Mint(ctx, credential.Claims{}, time.Hour); !errors.Is(err, credential.ErrNoSigningKey) {
		t.Fatalf("minting without a sealer: %v", err)
	}
}
