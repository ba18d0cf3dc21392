-- +goose Up

-- The SAML service provider's own key pair, one per SAML provider, created
-- on first use (the SP metadata or the first sign-in). Per provider rather
-- than per instance: each organization's IdP trusts a certificate no other
-- organization shares, and deleting the provider deletes its key. The
-- private key is sealed under the master key, bound to the provider's ID;
-- the certificate is public (it is in the SP metadata).
CREATE TABLE saml_sp_keys (
    provider_id        text        PRIMARY KEY REFERENCES sso_providers (id) ON DELETE CASCADE,
    certificate_der    bytea       NOT NULL,
    private_key_sealed bytea       NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- The assertion IDs each SAML provider has had accepted, kept until the
-- assertion could no longer be accepted anyway: a second response carrying
-- a recorded ID is a replay. Shared by every API replica. The library also
-- records LogoutRequest and artifact keys here under its own prefixes.
CREATE TABLE saml_assertion_ids (
    provider_id  text        NOT NULL REFERENCES sso_providers (id) ON DELETE CASCADE,
    assertion_id text        NOT NULL CHECK (length(assertion_id) BETWEEN 1 AND 1000),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (provider_id, assertion_id)
);
CREATE INDEX saml_assertion_ids_expiry ON saml_assertion_ids (provider_id, expires_at);

-- +goose Down
DROP TABLE saml_assertion_ids;
DROP TABLE saml_sp_keys;
