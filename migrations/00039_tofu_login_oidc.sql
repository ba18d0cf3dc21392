-- +goose Up

-- Signing keys have a purpose: the workload-identity issuer's keys, and the
-- OpenID provider's ID-token keys. A key signs for its purpose only.
ALTER TABLE oidc_signing_keys ADD COLUMN purpose text NOT NULL DEFAULT 'workload_identity'
    CHECK (purpose IN ('workload_identity', 'id_token'));
ALTER TABLE oidc_signing_keys ALTER COLUMN purpose DROP DEFAULT;
CREATE INDEX oidc_signing_keys_purpose ON oidc_signing_keys (purpose, not_before);

-- The OpenTofu/Terraform CLI's `tofu login` is a client built into Cairn:
-- public, redirected to http://localhost:<port>/login on the ports its
-- login.v1 discovery offers (checked in code), and answered with a user API
-- token instead of an access token. Its row anchors its grants.
ALTER TABLE oauth_clients DROP CONSTRAINT oauth_clients_kind_check;
ALTER TABLE oauth_clients ADD CONSTRAINT oauth_clients_kind_check
    CHECK (kind IN ('registered', 'metadata_document', 'builtin'));
INSERT INTO oauth_clients (id, kind, name, redirect_uris, grant_types, scopes, token_endpoint_auth_method)
VALUES ('terraform-cli', 'builtin', 'OpenTofu/Terraform CLI', '{http://localhost/login}', '{authorization_code}', '{tfe:api}', 'none');

-- OpenID Connect: the nonce of the authorization request and when the
-- person last authenticated, carried from consent into the ID token.
ALTER TABLE oauth_authorization_codes ADD COLUMN nonce text CHECK (length(nonce) <= 512);
ALTER TABLE oauth_authorization_codes ADD COLUMN auth_time timestamptz;

-- +goose Down
ALTER TABLE oauth_authorization_codes DROP COLUMN auth_time;
ALTER TABLE oauth_authorization_codes DROP COLUMN nonce;
DELETE FROM oauth_clients WHERE kind = 'builtin';
ALTER TABLE oauth_clients DROP CONSTRAINT oauth_clients_kind_check;
ALTER TABLE oauth_clients ADD CONSTRAINT oauth_clients_kind_check
    CHECK (kind IN ('registered', 'metadata_document'));
DELETE FROM oidc_signing_keys WHERE purpose <> 'workload_identity';
DROP INDEX oidc_signing_keys_purpose;
ALTER TABLE oidc_signing_keys DROP COLUMN purpose;
