-- +goose Up

-- Credential profiles (SPEC §2, §3): a workspace's access to a cloud
-- (workload-identity federation to aws, gcp or azure) or a write-only map
-- of environment variables (generic_secret). A profile is a detached draft
-- until one of its versions is verified and made current; archiving
-- detaches it for good.
CREATE TABLE credential_profiles (
    id                 text        PRIMARY KEY,
    organization_id    text        NOT NULL REFERENCES organizations (id),
    workspace_id       text        NOT NULL REFERENCES workspaces (id),
    provider           text        NOT NULL CHECK (provider IN ('aws', 'gcp', 'azure', 'generic_secret')),
    name               text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    current_version_id text,
    -- Set when a version first became current: from then on a run needs
    -- this profile, and a profile without a usable current version makes
    -- its runs end plan_credentials_required instead of running without.
    activated_at       timestamptz,
    archived_at        timestamptz,
    version_count      integer     NOT NULL DEFAULT 0,
    created_by_kind    text        NOT NULL,
    created_by_id      text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (archived_at IS NULL OR current_version_id IS NULL)
);
CREATE INDEX credential_profiles_workspace ON credential_profiles (workspace_id, created_at DESC, id DESC);
CREATE INDEX credential_profiles_organization ON credential_profiles (organization_id);

-- Versions are immutable and numbered per profile. A generic secret's map
-- is only ever stored sealed (tink envelope AEAD under CAIRN_MASTER_KEY,
-- bound to the version's identity) with its names beside it; a federation
-- version's configuration (role ARN, provider name, tenant and client IDs)
-- is not secret.
CREATE TABLE credential_profile_versions (
    id                 text        PRIMARY KEY,
    organization_id    text        NOT NULL REFERENCES organizations (id),
    profile_id         text        NOT NULL REFERENCES credential_profiles (id),
    number             integer     NOT NULL CHECK (number >= 1),
    provider           text        NOT NULL CHECK (provider IN ('aws', 'gcp', 'azure', 'generic_secret')),
    audience           text        NOT NULL CHECK (length(audience) BETWEEN 1 AND 512),
    phase              text        NOT NULL CHECK (phase IN ('plan_and_apply', 'speculative_plan')),
    configuration      jsonb,
    environment_names  text[],
    sealed_environment bytea,
    verified_at        timestamptz,
    disabled_at        timestamptz,
    created_by_kind    text        NOT NULL,
    created_by_id      text        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (profile_id, number),
    CHECK ((provider = 'generic_secret') =
           (configuration IS NULL AND environment_names IS NOT NULL AND sealed_environment IS NOT NULL)),
    CHECK (provider = 'generic_secret' OR (configuration IS NOT NULL AND environment_names IS NULL AND sealed_environment IS NULL)),
    CHECK (provider <> 'generic_secret' OR (phase = 'plan_and_apply' AND audience = 'cairn:generic-secret'))
);
CREATE INDEX credential_profile_versions_profile ON credential_profile_versions (profile_id, created_at DESC, id DESC);

ALTER TABLE credential_profiles ADD CONSTRAINT credential_profiles_current_version_fkey
    FOREIGN KEY (current_version_id) REFERENCES credential_profile_versions (id) DEFERRABLE INITIALLY DEFERRED;

-- A version never changes after it is written, except that it is verified
-- once and disabled once.
-- +goose StatementBegin
CREATE FUNCTION credential_version_is_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.organization_id, NEW.profile_id, NEW.number, NEW.provider, NEW.audience, NEW.phase,
        NEW.configuration, NEW.environment_names, NEW.sealed_environment, NEW.created_by_kind, NEW.created_by_id,
        NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.organization_id, OLD.profile_id, OLD.number, OLD.provider, OLD.audience, OLD.phase,
        OLD.configuration, OLD.environment_names, OLD.sealed_environment, OLD.created_by_kind, OLD.created_by_id,
        OLD.created_at)
       OR (OLD.verified_at IS NOT NULL AND NEW.verified_at IS DISTINCT FROM OLD.verified_at)
       OR (OLD.disabled_at IS NOT NULL AND NEW.disabled_at IS DISTINCT FROM OLD.disabled_at) THEN
        RAISE EXCEPTION 'credential profile versions are immutable';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER credential_profile_versions_immutable
    BEFORE UPDATE ON credential_profile_versions
    FOR EACH ROW EXECUTE FUNCTION credential_version_is_immutable();

-- Why a run's credentials could not be snapshotted (a required profile
-- without a usable current version, colliding environment names): its plan
-- then ends plan_credentials_required without a sandbox.
ALTER TABLE runs ADD COLUMN credential_snapshot_error text;

-- One-time handles for a phase attempt's credentials, issued in the
-- transaction that starts the attempt (the sandbox-create intent) and
-- redeemed once by the worker inside sandbox start. Only keyed digests of
-- the handle and of the callback nonce are stored, with the digest of the
-- manifest the handle was issued for.
CREATE TABLE credential_handles (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    run_id          text        NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    attempt_id      text        NOT NULL UNIQUE REFERENCES run_attempts (id) ON DELETE CASCADE,
    phase           text        NOT NULL CHECK (phase IN ('plan', 'apply', 'speculative_plan')),
    handle_hash     bytea       NOT NULL UNIQUE,
    manifest_digest bytea       NOT NULL,
    nonce_digest    bytea       NOT NULL,
    issued_at       timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    redeemed_at     timestamptz
);
CREATE INDEX credential_handles_run ON credential_handles (run_id);

-- Cairn's OIDC issuer keys for workload identity: RS256, used for nothing
-- else. A key is published in the JWKS before it signs (not_before) and
-- after it stops (until publish_until), so verifiers that cache the JWKS
-- never meet an unknown kid. Private keys are sealed under
-- CAIRN_MASTER_KEY, bound to their kid.
CREATE TABLE oidc_signing_keys (
    kid                text        PRIMARY KEY,
    public_jwk         jsonb       NOT NULL,
    sealed_private_key bytea       NOT NULL,
    not_before         timestamptz NOT NULL,
    retire_after       timestamptz NOT NULL,
    publish_until      timestamptz NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (not_before < retire_after AND retire_after <= publish_until)
);

-- +goose Down
DROP TABLE oidc_signing_keys;
DROP TABLE credential_handles;
ALTER TABLE runs DROP COLUMN credential_snapshot_error;
ALTER TABLE credential_profiles DROP CONSTRAINT credential_profiles_current_version_fkey;
DROP TABLE credential_profile_versions;
DROP FUNCTION credential_version_is_immutable();
DROP TABLE credential_profiles;
