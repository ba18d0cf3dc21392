package credential

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
)

// Files a federation writes into the sandbox's private directory, beside
// the configuration, each read by its cloud's SDKs.
const (
	AWSTokenFile       = "aws-web-identity-token"
	GCPTokenFile       = "gcp-subject-token"
	GCPCredentialsFile = "gcp-credentials.json"
	AzureTokenFile     = "azure-oidc-token"
)

// The conventional environment of each cloud's official providers and
// SDKs, so a configuration needs no credential settings of its own.
var federationEnvironment = map[string][]string{
	ProviderAWS: {"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME"},
	ProviderGCP: {"GOOGLE_APPLICATION_CREDENTIALS"},
	// ARM_* for the azurerm and azuread providers, AZURE_* for the Azure
	// SDKs' workload identity credential.
	ProviderAzure: {"ARM_CLIENT_ID", "ARM_TENANT_ID", "ARM_USE_OIDC", "ARM_OIDC_TOKEN_FILE_PATH", "ARM_SUBSCRIPTION_ID",
		"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE"},
}

// FederationEnvironmentNames are every name a federation sets; a generic
// secret may not set them.
func FederationEnvironmentNames() []string {
	var out []string
	for _, p := range []string{ProviderAWS, ProviderGCP, ProviderAzure} {
		out = append(out, federationEnvironment[p]...)
	}
	return out
}

// providerEnvironmentNames are the names one federation version sets.
func providerEnvironmentNames(provider string, cfg *FederationJSON) []string {
	names := slices.Clone(federationEnvironment[provider])
	if provider == ProviderAzure && (cfg == nil || cfg.SubscriptionID == "") {
		names = slices.DeleteFunc(names, func(n string) bool { return n == "ARM_SUBSCRIPTION_ID" })
	}
	return names
}

// VersionEnvironmentNames are the names a version sets in the sandbox:
// a generic map's names, or the variables its federation lays out.
func VersionEnvironmentNames(v Version) []string {
	if Federated(v.Provider) {
		return providerEnvironmentNames(v.Provider, v.Configuration)
	}
	return slices.Clone([]string(v.EnvironmentNames))
}

// Materials are what a sandbox receives for its credentials: environment
// for its commands, files for its private directory, and every secret
// among them, to be masked in its logs and plan.
type Materials struct {
	Env     map[string]string
	Files   map[string][]byte
	Secrets []string
}

func (m *Materials) merge(env map[string]string, files map[string][]byte, secrets ...string) {
	if m.Env == nil {
		m.Env, m.Files = map[string]string{}, map[string][]byte{}
	}
	maps.Copy(m.Env, env)
	maps.Copy(m.Files, files)
	m.Secrets = append(m.Secrets, secrets...)
}

// federationMaterials lays one federation out the way its cloud's SDKs
// read it, with the token in a file under dir (the absolute path commands
// see) and session the run's name for the cloud's logs.
func federationMaterials(provider string, cfg FederationConfig, token, dir, session string) (map[string]string, map[string][]byte) {
	switch provider {
	case ProviderAWS:
		return map[string]string{
			"AWS_ROLE_ARN":                cfg.RoleARN,
			"AWS_WEB_IDENTITY_TOKEN_FILE": filepath.Join(dir, AWSTokenFile),
			"AWS_ROLE_SESSION_NAME":       session,
		}, map[string][]byte{AWSTokenFile: []byte(token)}
	case ProviderGCP:
		creds, _ := json.MarshalIndent(GCPExternalAccount{
			Type:                           "external_account",
			Audience:                       "//iam.googleapis.com/" + cfg.WorkloadIdentityProvider,
			SubjectTokenType:               "urn:ietf:params:oauth:token-type:jwt",
			TokenURL:                       "https://sts.googleapis.com/v1/token",
			ServiceAccountImpersonationURL: "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/" + cfg.ServiceAccount + ":generateAccessToken",
			CredentialSource: GCPCredentialSource{File: filepath.Join(dir, GCPTokenFile),
				Format: GCPSourceFormat{Type: "text"}},
		}, "", "  ")
		return map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": filepath.Join(dir, GCPCredentialsFile)},
			map[string][]byte{GCPTokenFile: []byte(token), GCPCredentialsFile: creds}
	case ProviderAzure:
		env := map[string]string{
			"ARM_CLIENT_ID": cfg.ClientID, "ARM_TENANT_ID": cfg.TenantID, "ARM_USE_OIDC": "true",
			"ARM_OIDC_TOKEN_FILE_PATH": filepath.Join(dir, AzureTokenFile),
			"AZURE_CLIENT_ID":          cfg.ClientID, "AZURE_TENANT_ID": cfg.TenantID,
			"AZURE_FEDERATED_TOKEN_FILE": filepath.Join(dir, AzureTokenFile),
		}
		if cfg.SubscriptionID != "" {
			env["ARM_SUBSCRIPTION_ID"] = cfg.SubscriptionID
		}
		return env, map[string][]byte{AzureTokenFile: []byte(token)}
	}
	return nil, nil
}

// GCPExternalAccount is Google's external_account credential
// configuration (workload identity federation with a file-sourced token),
// as GOOGLE_APPLICATION_CREDENTIALS names it.
type GCPExternalAccount struct {
	Type                           string              `json:"type"`
	Audience                       string              `json:"audience"`
	SubjectTokenType               string              `json:"subject_token_type"`
	TokenURL                       string              `json:"token_url"`
	ServiceAccountImpersonationURL string              `json:"service_account_impersonation_url"`
	CredentialSource               GCPCredentialSource `json:"credential_source"`
}

// GCPCredentialSource is where Google's libraries read the subject token.
type GCPCredentialSource struct {
	File   string          `json:"file"`
	Format GCPSourceFormat `json:"format"`
}

// GCPSourceFormat says the token file holds the bare token.
type GCPSourceFormat struct {
	Type string `json:"type"`
}
