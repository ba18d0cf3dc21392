-- +goose Up

-- The private module registry. A module is addressed by organization,
-- registry name, namespace, name and provider (HCP's address); its
-- namespace is the organization's /api/v2 name for the private registry.
-- A module may be bound to a repository of the organization's code-host
-- installation, from which tag pushes publish versions.
CREATE TABLE registry_modules (
    id                     text        PRIMARY KEY,
    organization_id        text        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    registry_name          text        NOT NULL CHECK (registry_name IN ('private', 'public')),
    namespace              text        NOT NULL CHECK (length(namespace) BETWEEN 1 AND 64),
    name                   text        NOT NULL CHECK (name ~ '^[0-9A-Za-z]([0-9A-Za-z_-]{0,62}[0-9A-Za-z])?$'),
    provider               text        NOT NULL CHECK (provider ~ '^[0-9a-z]{1,64}$'),
    status                 text        NOT NULL CHECK (status IN ('pending', 'setup_complete', 'setup_failed', 'no_version_tags')),
    source_installation_id bigint,
    source_repository_id   bigint,
    source_owner           text,
    source_repository      text,
    source_directory       text        CHECK (length(source_directory) <= 1024),
    source_tag_prefix      text        CHECK (length(source_tag_prefix) <= 100),
    created_by             text        NOT NULL,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    -- A binding names its installation and repository together, or nothing.
    CHECK ((source_installation_id IS NULL) = (source_repository_id IS NULL)
       AND (source_repository_id IS NULL) = (source_owner IS NULL)
       AND (source_owner IS NULL) = (source_repository IS NULL)),
    UNIQUE (id, organization_id)
);
-- One module per address; also the lookup by address (modules.v1, /api/v2).
CREATE UNIQUE INDEX registry_modules_address_key
    ON registry_modules (organization_id, registry_name, namespace, name, provider);
-- The /v1 list: by name, then provider, then ID.
CREATE INDEX registry_modules_list ON registry_modules (organization_id, name, provider, id);
-- Tag pushes find the modules bound to a repository.
CREATE INDEX registry_modules_source ON registry_modules (source_repository_id) WHERE source_repository_id IS NOT NULL;

-- A module's versions. The version string is kept exactly as published;
-- sort_key orders by semver precedence (bytewise), ties broken by the
-- string itself (build metadata). Deprecation and revocation are HCP's
-- flags: revocation needs deprecation, so un-revoking leaves a deprecated
-- version. The archive is a sealed blob whose SHA-256 is recorded; facts
-- are what terraform-config-inspect read from it.
CREATE TABLE registry_module_versions (
    id                 text        PRIMARY KEY,
    module_id          text        NOT NULL,
    organization_id    text        NOT NULL,
    version            text        NOT NULL CHECK (length(version) BETWEEN 5 AND 128),
    sort_key           bytea       NOT NULL,
    status             text        NOT NULL CHECK (status IN ('pending', 'ok', 'errored')),
    error_code         text        CHECK (length(error_code) <= 64),
    error_message      text        CHECK (length(error_message) <= 500),
    blob_key           text,
    archive_sha256     text        CHECK (archive_sha256 ~ '^[0-9a-f]{64}$'),
    archive_bytes      bigint      CHECK (archive_bytes >= 0),
    facts              jsonb,
    origin             text        NOT NULL CHECK (origin IN ('upload', 'tag')),
    tag                text        CHECK (length(tag) <= 255),
    commit_sha         text        CHECK (commit_sha ~ '^[0-9a-f]{40,64}$'),
    deprecated_reason  text        CHECK (length(deprecated_reason) <= 1000),
    deprecated_link    text        CHECK (length(deprecated_link) <= 2048),
    deprecated_at      timestamptz,
    deprecated_by      text,
    revoked_reason     text        CHECK (length(revoked_reason) <= 1000),
    revoked_at         timestamptz,
    revoked_by         text,
    created_by         text        NOT NULL,
    created_at         timestamptz NOT NULL,
    published_at       timestamptz,
    FOREIGN KEY (module_id, organization_id) REFERENCES registry_modules (id, organization_id) ON DELETE CASCADE,
    CHECK ((status = 'errored') = (error_code IS NOT NULL)),
    CHECK (status <> 'ok' OR (blob_key IS NOT NULL AND archive_sha256 IS NOT NULL AND archive_bytes IS NOT NULL
                              AND facts IS NOT NULL AND published_at IS NOT NULL)),
    CHECK (status <> 'pending' OR (blob_key IS NULL AND archive_sha256 IS NULL)),
    CHECK ((deprecated_at IS NULL) = (deprecated_by IS NULL)),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL)),
    CHECK (revoked_at IS NULL OR deprecated_at IS NOT NULL),
    CHECK ((origin = 'tag') = (tag IS NOT NULL))
);
CREATE UNIQUE INDEX registry_module_versions_version_key ON registry_module_versions (module_id, version);
-- The version list, newest (semver) first, and the resolvable versions.
CREATE INDEX registry_module_versions_list ON registry_module_versions (module_id, sort_key DESC, version DESC);
CREATE INDEX registry_module_versions_organization ON registry_module_versions (organization_id);

-- +goose Down
DROP TABLE registry_module_versions;
DROP TABLE registry_modules;
