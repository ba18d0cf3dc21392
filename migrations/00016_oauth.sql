-- +goose Up

-- OAuth 2.1 clients of the authorization server for agents. A client is
-- registered (RFC 7591; id ocl_…) or identified by the HTTPS URL of its
-- client ID metadata document, whose fetched metadata is cached here.
-- Confidential clients keep only a keyed hash of their secret.
CREATE TABLE oauth_clients (
    id                         text        PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 512),
    kind                       text        NOT NULL CHECK (kind IN ('registered', 'metadata_document')),
    name                       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    client_uri                 text        CHECK (length(client_uri) <= 512),
    redirect_uris              text[]      NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 10),
    grant_types                text[]      NOT NULL,
    scopes                     text[]      NOT NULL,
    token_endpoint_auth_method text        NOT NULL
        CHECK (token_endpoint_auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    secret_hash                bytea,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    -- A metadata document is fetched again once this has passed.
    refresh_after              timestamptz,
    CHECK ((token_endpoint_auth_method = 'none') = (secret_hash IS NULL)),
    CHECK ((kind = 'metadata_document') = (refresh_after IS NOT NULL))
);
CREATE INDEX oauth_clients_created ON oauth_clients (created_at) WHERE kind = 'registered';

-- A grant is one person's consent for one client to act in one of their
-- organizations with some scopes, for one resource. Every code, access
-- token and refresh token belongs to exactly one grant; revoking the grant
-- (from the dashboard, or on a replayed code or refresh token) revokes
-- them all at once.
CREATE TABLE oauth_grants (
    id              text        PRIMARY KEY,
    client_id       text        NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
    organization_id text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         text        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    scopes          text[]      NOT NULL CHECK (cardinality(scopes) >= 1),
    resource        text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz,
    -- Nothing of the grant works after this: the last code or token it
    -- issued has expired. Extended by every issuance.
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    revoked_reason  text        CHECK (revoked_reason IN ('revoked', 'code_replayed', 'refresh_token_replayed', 'token_revoked')),
    CHECK ((revoked_at IS NULL) = (revoked_reason IS NULL))
);
CREATE INDEX oauth_grants_organization ON oauth_grants (organization_id, created_at DESC);
CREATE INDEX oauth_grants_expired ON oauth_grants (expires_at);

-- Authorization codes: single use, short-lived, bound to the redirect URI
-- and the PKCE S256 challenge of their request. Only a keyed hash is kept.
CREATE TABLE oauth_authorization_codes (
    code_hash      bytea       PRIMARY KEY,
    grant_id       text        NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    redirect_uri   text        NOT NULL,
    code_challenge text        NOT NULL CHECK (code_challenge ~ '^[A-Za-z0-9_-]{43}$'),
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz
);
CREATE INDEX oauth_authorization_codes_grant ON oauth_authorization_codes (grant_id);

-- Access tokens are JWTs (the id is their jti); each is resolved against
-- this row on /v1, so revocation applies at once. Only a keyed hash of the
-- whole token is kept.
CREATE TABLE oauth_access_tokens (
    id         text        PRIMARY KEY,
    token_hash bytea       NOT NULL,
    grant_id   text        NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    scopes     text[]      NOT NULL CHECK (cardinality(scopes) >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE UNIQUE INDEX oauth_access_tokens_hash ON oauth_access_tokens (token_hash);
CREATE INDEX oauth_access_tokens_grant ON oauth_access_tokens (grant_id);

-- Refresh tokens rotate: each use consumes the token and issues its
-- successor in the same grant. Presenting a consumed one again means two
-- parties hold the chain, and the whole grant is revoked.
CREATE TABLE oauth_refresh_tokens (
    id         text        PRIMARY KEY,
    token_hash bytea       NOT NULL,
    grant_id   text        NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    scopes     text[]      NOT NULL CHECK (cardinality(scopes) >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    revoked_at timestamptz
);
CREATE UNIQUE INDEX oauth_refresh_tokens_hash ON oauth_refresh_tokens (token_hash);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);

-- +goose Down
DROP TABLE oauth_refresh_tokens;
DROP TABLE oauth_access_tokens;
DROP TABLE oauth_authorization_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_clients;
