package credential

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// Providers a profile can have: three cloud federations and the generic
// secret.
const (
	ProviderAWS     = "aws"
	ProviderGCP     = "gcp"
	ProviderAzure   = "azure"
	ProviderGeneric = "generic_secret"
)

// Providers lists every provider.
var Providers = []string{ProviderAWS, ProviderGCP, ProviderAzure, ProviderGeneric}

// Federated reports whether provider is a cloud federation (its sandbox
// gets an OIDC token), not a generic secret.
func Federated(provider string) bool {
	return provider != ProviderGeneric && slices.Contains(Providers, provider)
}

// Phases a version can serve. plan_and_apply serves the plan and apply of
// tracked and manual runs; speculative_plan only speculative plans, under a
// subject of its own.
const (
	PhasePlanAndApply    = "plan_and_apply"
	PhaseSpeculativePlan = "speculative_plan"
)

// Run phases a credential is issued for; each has its own OIDC subject.
const (
	RunPhasePlan            = "plan"
	RunPhaseApply           = "apply"
	RunPhaseSpeculativePlan = "speculative_plan"
)

// GenericAudience is the audience every generic-secret version reports.
const GenericAudience = "cairn:generic-secret"

// Limits of SPEC §8 and of a workspace.
const (
	// DocumentLimit bounds a credential-profile mutation document.
	DocumentLimit = 100_000
	// EnvironmentLimit bounds a generic map as canonical UTF-8 JSON.
	EnvironmentLimit = 64 << 10
	// MaxEnvironmentNames bounds a generic map's names (at least one).
	MaxEnvironmentNames = 32
	// MaxProfilesPerWorkspace bounds a workspace's profiles, archived ones
	// included.
	MaxProfilesPerWorkspace = 50
	maxNameChars            = 100
	maxAudienceBytes        = 512
)

// Profile is a workspace's credential profile.
type Profile struct {
	ID               string     `db:"id"`
	OrganizationID   string     `db:"organization_id"`
	WorkspaceID      string     `db:"workspace_id"`
	Provider         string     `db:"provider"`
	Name             string     `db:"name"`
	CurrentVersionID *string    `db:"current_version_id"`
	ActivatedAt      *time.Time `db:"activated_at"`
	ArchivedAt       *time.Time `db:"archived_at"`
	VersionCount     int        `db:"version_count"`
	CreatedByKind    string     `db:"created_by_kind"`
	CreatedByID      string     `db:"created_by_id"`
	CreatedAt        time.Time  `db:"created_at"`
	UpdatedAt        time.Time  `db:"updated_at"`
}

// State is a profile's lifecycle state: a detached draft until a version
// becomes current, active from then on, archived for good.
func (p Profile) State() string {
	switch {
	case p.ArchivedAt != nil:
		return "archived"
	case p.ActivatedAt == nil:
		return "draft"
	}
	return "active"
}

// Version is one immutable version of a profile. A generic secret's map is
// only ever held sealed; Sealed never leaves this package's store and
// redemption.
type Version struct {
	ID               string          `db:"id"`
	OrganizationID   string          `db:"organization_id"`
	ProfileID        string          `db:"profile_id"`
	Number           int             `db:"number"`
	Provider         string          `db:"provider"`
	Audience         string          `db:"audience"`
	Phase            string          `db:"phase"`
	Configuration    *FederationJSON `db:"configuration"`
	EnvironmentNames pq.StringArray  `db:"environment_names"`
	Sealed           []byte          `db:"sealed_environment"`
	VerifiedAt       *time.Time      `db:"verified_at"`
	DisabledAt       *time.Time      `db:"disabled_at"`
	CreatedByKind    string          `db:"created_by_kind"`
	CreatedByID      string          `db:"created_by_id"`
	CreatedAt        time.Time       `db:"created_at"`
}

// Usable reports whether the version may be handed to a sandbox: verified
// and not revoked.
func (v Version) Usable() bool { return v.VerifiedAt != nil && v.DisabledAt == nil }

// Permits reports whether the version serves a run phase.
func (v Version) Permits(runPhase string) bool {
	switch runPhase {
	case RunPhasePlan, RunPhaseApply:
		return v.Phase == PhasePlanAndApply
	case RunPhaseSpeculativePlan:
		return v.Phase == PhaseSpeculativePlan && Federated(v.Provider)
	}
	return false
}

// ValidateProvider accepts the four providers.
func ValidateProvider(provider string) error {
	if !slices.Contains(Providers, provider) {
		return fmt.Errorf("%w: provider must be one of aws, gcp, azure, generic_secret", ErrConfigurationInvalid)
	}
	return nil
}

// ValidateName trims a profile's display name (empty: the provider's).
func ValidateName(name, provider string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = provider
	}
	if utf8.RuneCountInString(name) > maxNameChars || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: name must be 1–%d characters without control characters", ErrConfigurationInvalid, maxNameChars)
	}
	return name, nil
}

// ValidatePhase accepts the phases a provider's new versions may have:
// generic secrets plan_and_apply only, federations also speculative_plan.
func ValidatePhase(provider, phase string) error {
	switch {
	case phase == PhasePlanAndApply:
		return nil
	case phase == PhaseSpeculativePlan && Federated(provider):
		return nil
	}
	return ErrPhaseUnsupported
}

// DefaultAudience is the audience a federation version gets when none is
// given: what each cloud expects by default.
func DefaultAudience(provider string, cfg FederationConfig) string {
	switch provider {
	case ProviderAWS:
		return "sts.amazonaws.com"
	case ProviderGCP:
		return "//iam.googleapis.com/" + cfg.WorkloadIdentityProvider
	case ProviderAzure:
		return "api://AzureADTokenExchange"
	}
	return GenericAudience
}

// ValidateAudience settles a version's audience: a generic secret's is
// always GenericAudience; a federation's is what the version names, or the
// cloud's default.
func ValidateAudience(provider, audience string, cfg FederationConfig) (string, error) {
	if provider == ProviderGeneric {
		if audience != "" && audience != GenericAudience {
			return "", fmt.Errorf("%w: a generic secret's audience is %s", ErrConfigurationInvalid, GenericAudience)
		}
		return GenericAudience, nil
	}
	if audience == "" {
		return DefaultAudience(provider, cfg), nil
	}
	if len(audience) > maxAudienceBytes || strings.ContainsFunc(audience, func(r rune) bool { return r <= 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: audience must be 1–%d bytes without spaces or control characters", ErrConfigurationInvalid, maxAudienceBytes)
	}
	return audience, nil
}

// FederationConfig is a federation version's configuration: which of its
// fields apply depends on the provider. None of it is secret.
type FederationConfig struct {
	// RoleARN is the AWS IAM role the token is exchanged for.
	RoleARN string `json:"role_arn,omitempty"`
	// WorkloadIdentityProvider is the GCP provider's resource name,
	// projects/{number}/locations/global/workloadIdentityPools/{pool}/providers/{provider}.
	WorkloadIdentityProvider string `json:"workload_identity_provider,omitempty"`
	// ServiceAccount is the GCP service account impersonated.
	ServiceAccount string `json:"service_account,omitempty"`
	// TenantID and ClientID name the Azure application (or managed
	// identity) with the federated credential; SubscriptionID is optional.
	TenantID       string `json:"tenant_id,omitempty"`
	ClientID       string `json:"client_id,omitempty"`
	SubscriptionID string `json:"subscription_id,omitempty"`
}

// FederationJSON is a FederationConfig as stored in jsonb.
type FederationJSON struct{ FederationConfig }

// Scan reads a jsonb value.
func (f *FederationJSON) Scan(src any) error {
	var raw []byte
	switch v := src.(type) {
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		return fmt.Errorf("scanning federation configuration from %T", src)
	}
	return json.Unmarshal(raw, &f.FederationConfig)
}

var (
	roleARNPattern = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$`)
	gcpProvider    = regexp.MustCompile(`^projects/[0-9]{1,20}/locations/global/workloadIdentityPools/[a-z0-9-]{4,32}/providers/[a-z0-9-]{4,32}$`)
	gcpAccount     = regexp.MustCompile(`^[a-z][a-z0-9-]{4,61}[a-z0-9]@[a-z0-9-]+(\.[a-z0-9-]+)*\.iam\.gserviceaccount\.com$|^[0-9]{1,20}-compute@developer\.gserviceaccount\.com$`)
	uuidPattern    = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// ParseFederation decodes and checks a federation version's configuration:
// exactly the provider's fields, each in its cloud's shape.
func ParseFederation(provider string, raw json.RawMessage) (FederationConfig, error) {
	var cfg FederationConfig
	if err := jsondoc.DecodeStrict(raw, &cfg); err != nil {
		return FederationConfig{}, fmt.Errorf("%w: configuration must be an object of the provider's fields", ErrConfigurationInvalid)
	}
	bad := func(format string, args ...any) (FederationConfig, error) {
		return FederationConfig{}, fmt.Errorf("%w: "+format, append([]any{ErrConfigurationInvalid}, args...)...)
	}
	switch provider {
	case ProviderAWS:
		if !roleARNPattern.MatchString(cfg.RoleARN) {
			return bad("role_arn must be an IAM role ARN (arn:aws:iam::123456789012:role/name)")
		}
		if cfg.WorkloadIdentityProvider+cfg.ServiceAccount+cfg.TenantID+cfg.ClientID+cfg.SubscriptionID != "" {
			return bad("an aws configuration has only role_arn")
		}
	case ProviderGCP:
		if !gcpProvider.MatchString(cfg.WorkloadIdentityProvider) {
			return bad("workload_identity_provider must be projects/{number}/locations/global/workloadIdentityPools/{pool}/providers/{provider}")
		}
		if !gcpAccount.MatchString(cfg.ServiceAccount) {
			return bad("service_account must be a service account e-mail")
		}
		if cfg.RoleARN+cfg.TenantID+cfg.ClientID+cfg.SubscriptionID != "" {
			return bad("a gcp configuration has only workload_identity_provider and service_account")
		}
	case ProviderAzure:
		if !uuidPattern.MatchString(cfg.TenantID) || !uuidPattern.MatchString(cfg.ClientID) {
			return bad("tenant_id and client_id must be UUIDs")
		}
		if cfg.SubscriptionID != "" && !uuidPattern.MatchString(cfg.SubscriptionID) {
			return bad("subscription_id must be a UUID")
		}
		if cfg.RoleARN+cfg.WorkloadIdentityProvider+cfg.ServiceAccount != "" {
			return bad("an azure configuration has only tenant_id, client_id and subscription_id")
		}
		cfg.TenantID, cfg.ClientID, cfg.SubscriptionID = strings.ToLower(cfg.TenantID), strings.ToLower(cfg.ClientID), strings.ToLower(cfg.SubscriptionID)
	default:
		return bad("provider %q has no federation configuration", provider)
	}
	return cfg, nil
}

// Environment is a generic secret's map, decoded and checked.
type Environment struct {
	// Names are the map's names, sorted.
	Names []string
	// Canonical is the map as canonical UTF-8 JSON (keys sorted, nothing
	// escaped that need not be): what is sealed.
	Canonical []byte
}

// ParseEnvironment decodes a generic secret's configuration,
// {"environment": {NAME: value, …}}, and checks it before anything is
// sealed: 1–32 safe, unique names the runner does not own, string values
// without NUL (ErrSecretValueInvalid), at most EnvironmentLimit bytes of
// canonical JSON (ErrEnvironmentTooLarge). Errors never quote a value.
func ParseEnvironment(raw json.RawMessage) (Environment, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	bad := func(format string, args ...any) (Environment, error) {
		return Environment{}, fmt.Errorf("%w: "+format, append([]any{ErrConfigurationInvalid}, args...)...)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(`configuration must be {"environment": {NAME: value}}`)
	}
	var env map[string]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("configuration is not valid JSON")
		}
		if key, _ := tok.(string); key != "environment" || env != nil {
			return bad(`configuration has exactly one field, "environment"`)
		}
		if env, err = decodeUniqueObject(dec); err != nil {
			return Environment{}, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad("configuration is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bad("configuration is not valid JSON")
	}
	if len(env) == 0 || len(env) > MaxEnvironmentNames {
		return bad("environment must hold 1–%d names", MaxEnvironmentNames)
	}
	names := make([]string, 0, len(env))
	for name, value := range env {
		if err := ValidateEnvironmentName(name); err != nil {
			return Environment{}, err
		}
		if strings.ContainsRune(value, 0) {
			return Environment{}, fmt.Errorf("%w: the value of %s holds a NUL character", ErrSecretValueInvalid, name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	var canonical bytes.Buffer
	enc := json.NewEncoder(&canonical)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(env); err != nil {
		return bad("environment cannot be encoded")
	}
	body := bytes.TrimSuffix(canonical.Bytes(), []byte("\n"))
	if len(body) > EnvironmentLimit {
		return Environment{}, fmt.Errorf("%w: %d bytes of canonical JSON, at most %d", ErrEnvironmentTooLarge, len(body), EnvironmentLimit)
	}
	return Environment{Names: names, Canonical: body}, nil
}

// decodeUniqueObject reads one JSON object of strings, refusing a name
// given twice (encoding/json would keep the last silently) and a value
// that is not a string.
func decodeUniqueObject(dec *json.Decoder) (map[string]string, error) {
	bad := fmt.Errorf("%w: environment must be an object of unique names to string values", ErrConfigurationInvalid)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad
	}
	out := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad
		}
		name, _ := tok.(string)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: environment names %s twice", ErrConfigurationInvalid, safeName(name))
		}
		tok, err = dec.Token()
		value, isString := tok.(string)
		if err != nil || !isString {
			return nil, bad
		}
		out[name] = value
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad
	}
	return out, nil
}

// safeName is a name fit for an error message: only names that pass the
// name pattern are repeated.
func safeName(name string) string {
	if envName.MatchString(name) {
		return name
	}
	return "a name"
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// runnerOwned are names the runner, the sandbox, the shell, the dynamic
// loader or a federation sets: a secret may not replace them.
var runnerOwned = map[string]bool{
	"PATH": true, "HOME": true, "TMPDIR": true, "PWD": true, "OLDPWD": true, "SHELL": true, "USER": true,
	"LOGNAME": true, "IFS": true, "ENV": true, "BASH_ENV": true, "CDPATH": true, "PS4": true, "SHELLOPTS": true,
	"BASHOPTS": true, "GLOBIGNORE": true, "PROMPT_COMMAND": true, "SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
	"CHECKPOINT_DISABLE": true, "GCONV_PATH": true, "GETCONF_DIR": true, "GLIBC_TUNABLES": true,
	"HOSTALIASES": true, "LOCALDOMAIN": true, "LOCPATH": true, "NIS_PATH": true, "NLSPATH": true,
	"RESOLV_HOST_CONF": true, "RES_OPTIONS": true, "TZDIR": true,
	// The runner's sandbox-wide settings (memory limits, the plugin socket
	// directory) and the Go runtime's switches of the CLI's TLS and x509.
	"GOGC": true, "GOMEMLIMIT": true, "PLUGIN_UNIX_SOCKET_DIR": true, "GODEBUG": true,
	// Where the CLI finds its configuration, credentials and implicit
	// provider directories besides TF_CLI_CONFIG_FILE.
	"TERRAFORM_CONFIG": true, "XDG_CONFIG_HOME": true, "XDG_DATA_HOME": true,
	// A proxy sees (or, with a CA of its choosing, opens) every connection
	// the run makes: to Cairn with the run token, to a federation's token
	// exchange with the workload identity token.
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"SSLKEYLOGFILE": true, "CURL_CA_BUNDLE": true,
	// Where a federation's identity token is sent, and whom it trusts.
	"AWS_ENDPOINT_URL": true, "AWS_CA_BUNDLE": true, "AZURE_AUTHORITY_HOST": true, "ARM_METADATA_HOSTNAME": true,
}

// runnerOwnedPrefixes are families of names: the CLI's (TF_, TOFU_,
// OPENTOFU_), the loader's, the shell's, TLS trust (SSL_), git's (a module
// source's TLS verification, proxy, SSH command and configuration) and
// AWS's per-service endpoints (AWS_ENDPOINT_URL_STS receives the web
// identity token).
var runnerOwnedPrefixes = []string{"CAIRN_", "TF_", "TFE_", "TOFU_", "OPENTOFU_", "LD_", "MALLOC_", "BASH_FUNC_",
	"SSL_", "GIT_", "AWS_ENDPOINT_URL_"}

// ValidateEnvironmentName accepts a safe name the runner does not own.
func ValidateEnvironmentName(name string) error {
	if !envName.MatchString(name) {
		return fmt.Errorf("%w: environment names are 1–128 letters, digits and underscores, not starting with a digit", ErrConfigurationInvalid)
	}
	if RunnerOwnsEnvironmentName(name) {
		return fmt.Errorf("%w: %s is set by the runner", ErrConfigurationInvalid, name)
	}
	return nil
}

// RunnerOwnsEnvironmentName reports whether the runner, the sandbox, the
// shell, the dynamic loader or a federation sets name (or it changes how
// they behave), so that nothing a user writes (a credential profile's
// environment, a variable set's env variable) may set it. TF_VAR_<name> is
// how a value reaches an input variable, so TF_VAR_ with a name is not the
// runner's although TF_ is.
func RunnerOwnsEnvironmentName(name string) bool {
	upper := strings.ToUpper(name)
	if rest, ok := strings.CutPrefix(upper, "TF_VAR_"); ok && rest != "" {
		return false
	}
	owned := runnerOwned[upper] || slices.Contains(FederationEnvironmentNames(), upper)
	for _, p := range runnerOwnedPrefixes {
		owned = owned || strings.HasPrefix(upper, p)
	}
	return owned
}

// Lifecycle transitions (SPEC §3), as pure checks.

// CanCreateVersion refuses a version of an archived profile.
func CanCreateVersion(p Profile) error {
	if p.ArchivedAt != nil {
		return ErrProfileArchived
	}
	return nil
}

// CanVerify refuses verifying a version of an archived profile or a
// revoked version.
func CanVerify(p Profile, v Version) error {
	switch {
	case p.ArchivedAt != nil:
		return ErrProfileArchived
	case v.DisabledAt != nil:
		return ErrVersionDisabled
	}
	return nil
}

// Verified is p and v after v was verified and made current: the profile
// is active from its first current version on.
func Verified(p Profile, v Version, now time.Time) (Profile, Version) {
	if v.VerifiedAt == nil {
		v.VerifiedAt = &now
	}
	p.CurrentVersionID = &v.ID
	if p.ActivatedAt == nil {
		p.ActivatedAt = &now
	}
	p.UpdatedAt = now
	return p, v
}

// Archived is p archived: detached for good, with no current version.
func Archived(p Profile, now time.Time) (Profile, error) {
	if p.ArchivedAt != nil {
		return p, ErrProfileArchived
	}
	p.ArchivedAt, p.CurrentVersionID, p.UpdatedAt = &now, nil, now
	return p, nil
}

// Revoked is v disabled, and p without it as its current version. A
// version is revoked once; current or historical alike.
func Revoked(p Profile, v Version, now time.Time) (Profile, Version, error) {
	if v.DisabledAt != nil {
		return p, v, ErrVersionDisabled
	}
	v.DisabledAt = &now
	if p.CurrentVersionID != nil && *p.CurrentVersionID == v.ID {
		p.CurrentVersionID, p.UpdatedAt = nil, now
	}
	return p, v, nil
}
