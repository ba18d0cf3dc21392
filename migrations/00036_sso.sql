-- +goose Up

-- Organization SSO: an owner registers OIDC or SAML identity providers; with
-- sso_required the non-owner members must sign in through one of them
-- (owners keep password sign-in as break-glass, as HCP does).
ALTER TABLE organizations ADD COLUMN sso_required boolean NOT NULL DEFAULT false;

-- An organization's identity provider. The OIDC client secret is sealed
-- under the master key, bound to the provider's ID; the SAML IdP metadata
-- is public. The mapping names the claims or attributes that carry the
-- groups, e-mail and name of the person signing in.
CREATE TABLE sso_providers (
    id                        text        PRIMARY KEY,
    organization_id           text        NOT NULL REFERENCES organizations (id),
    type                      text        NOT NULL CHECK (type IN ('oidc', 'saml')),
    issuer                    text        NOT NULL CHECK (length(issuer) BETWEEN 1 AND 2000),
    oidc_client_id            text        CHECK (length(oidc_client_id) BETWEEN 1 AND 500),
    oidc_client_secret_sealed bytea,
    oidc_scopes               text[]      NOT NULL DEFAULT '{}',
    saml_metadata_xml         text        CHECK (length(saml_metadata_xml) BETWEEN 1 AND 1048576),
    groups_attribute          text        NOT NULL CHECK (length(groups_attribute) BETWEEN 1 AND 200),
    email_attribute           text        NOT NULL CHECK (length(email_attribute) BETWEEN 1 AND 200),
    name_attribute            text        NOT NULL CHECK (length(name_attribute) BETWEEN 1 AND 200),
    default_role              text        NOT NULL CHECK (default_role IN ('admin', 'writer', 'reader', 'member')),
    created_by                text        NOT NULL,
    created_at                timestamptz NOT NULL DEFAULT now(),
    CHECK ((type = 'oidc' AND oidc_client_id IS NOT NULL AND oidc_client_secret_sealed IS NOT NULL AND saml_metadata_xml IS NULL)
        OR (type = 'saml' AND saml_metadata_xml IS NOT NULL AND oidc_client_id IS NULL AND oidc_client_secret_sealed IS NULL))
);
CREATE INDEX sso_providers_organization ON sso_providers (organization_id);

-- The e-mail domains that route a sign-in to a provider: one provider per
-- domain across the whole instance, so an address never has two.
CREATE TABLE sso_domains (
    domain          text NOT NULL PRIMARY KEY CHECK (domain = lower(domain) AND length(domain) BETWEEN 1 AND 253),
    provider_id     text NOT NULL REFERENCES sso_providers (id) ON DELETE CASCADE,
    organization_id text NOT NULL
);
CREATE INDEX sso_domains_provider ON sso_domains (provider_id);

-- A person's account at an identity provider: provider_key is the instance
-- IdP ('idp:' and its name) or an organization provider's ID.
CREATE TABLE external_identities (
    provider_key      text        NOT NULL,
    subject           text        NOT NULL CHECK (length(subject) BETWEEN 1 AND 1000),
    user_id           text        NOT NULL REFERENCES users (id),
    created_at        timestamptz NOT NULL DEFAULT now(),
    last_signed_in_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider_key, subject)
);
CREATE INDEX external_identities_user ON external_identities (user_id);

-- A sign-in through an identity provider between its start and its
-- callback. The state travels through the browser and is stored only as a
-- keyed hash; the PKCE verifier is sealed; the binding is the SHA-256 of a
-- secret the dashboard keeps in the browser, checked when the one-time code
-- is redeemed. A flow is used once (consumed_at) and lives 10 minutes.
CREATE TABLE sign_in_flows (
    state_hash           bytea       PRIMARY KEY,
    kind                 text        NOT NULL CHECK (kind IN ('social', 'sso', 'test')),
    provider             text        NOT NULL,
    organization_id      text,
    initiated_by         text,
    nonce                text        NOT NULL,
    pkce_verifier_sealed bytea,
    callback_url         text        NOT NULL CHECK (length(callback_url) BETWEEN 1 AND 2000),
    binding_hash         bytea       NOT NULL CHECK (length(binding_hash) = 32),
    saml_request_id      text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    expires_at           timestamptz NOT NULL,
    consumed_at          timestamptz
);
CREATE UNIQUE INDEX sign_in_flows_saml_request ON sign_in_flows (saml_request_id) WHERE saml_request_id IS NOT NULL;
CREATE INDEX sign_in_flows_expiry ON sign_in_flows (expires_at);

-- The one-time code a finished federated sign-in hands the dashboard in the
-- redirect: it redeems the code (with the binding secret) for the session,
-- whose token is kept sealed here until then. Single use, 5 minutes.
CREATE TABLE sign_in_codes (
    code_hash     bytea       PRIMARY KEY,
    user_id       text        NOT NULL REFERENCES users (id),
    session_id    text        NOT NULL REFERENCES sessions (id),
    token_sealed  bytea,
    binding_hash  bytea       NOT NULL CHECK (length(binding_hash) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    consumed_at   timestamptz
);
CREATE INDEX sign_in_codes_expiry ON sign_in_codes (expires_at);

-- What a dry-run sign-in through a provider asserted and which teams it
-- would map to; it changes nothing else. Read by the owner who ran it.
CREATE TABLE sso_test_results (
    id              text        PRIMARY KEY,
    provider_id     text        NOT NULL REFERENCES sso_providers (id) ON DELETE CASCADE,
    organization_id text        NOT NULL,
    tested_by       text        NOT NULL,
    email           text        NOT NULL DEFAULT '',
    email_verified  boolean     NOT NULL DEFAULT false,
    groups          text[]      NOT NULL DEFAULT '{}',
    teams           text[]      NOT NULL DEFAULT '{}',
    error           text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);

-- +goose Down
DROP TABLE sso_test_results;
DROP TABLE sign_in_codes;
DROP TABLE sign_in_flows;
DROP TABLE external_identities;
DROP TABLE sso_domains;
DROP TABLE sso_providers;
ALTER TABLE organizations DROP COLUMN sso_required;
