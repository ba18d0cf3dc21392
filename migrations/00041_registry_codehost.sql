-- +goose Up

-- Publishing module versions from the code host. A tag push (or a sync)
-- of a repository a module is bound to creates one ingestion per module
-- and tag; its job (workflow module-ingestion-{id}) resolves the tag's
-- commit, downloads that commit's archive, re-packs the bound directory
-- and publishes it as the version the tag names. The binding is copied
-- onto the ingestion, so rebinding the module later does not change what
-- an accepted ingestion publishes.
CREATE TABLE registry_module_ingestions (
    id               text        PRIMARY KEY,
    organization_id  text        NOT NULL,
    module_id        text        NOT NULL,
    trigger          text        NOT NULL CHECK (trigger IN ('tag_push', 'sync')),
    -- The delivery that announced the tag (a push); NULL for a sync. The
    -- delivery row is written later in the same acceptance transaction.
    delivery_id      text        REFERENCES github_deliveries (delivery_id) DEFERRABLE INITIALLY DEFERRED,
    installation_id  bigint      NOT NULL,
    repository_id    bigint      NOT NULL,
    repository_owner text        NOT NULL,
    repository_name  text        NOT NULL,
    directory        text        NOT NULL CHECK (length(directory) <= 1024),
    tag              text        NOT NULL CHECK (length(tag) BETWEEN 1 AND 255),
    -- What the pushed or listed ref named; the commit the job resolved.
    object_sha       text        NOT NULL CHECK (object_sha ~ '^[0-9a-f]{40}$'),
    commit_sha       text        CHECK (commit_sha ~ '^[0-9a-f]{40}$'),
    version          text        NOT NULL CHECK (length(version) BETWEEN 5 AND 128),
    status           text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'published', 'errored', 'skipped')),
    error_code       text        CHECK (length(error_code) <= 64),
    error_message    text        CHECK (length(error_message) <= 500),
    version_id       text        REFERENCES registry_module_versions (id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL,
    settled_at       timestamptz,
    FOREIGN KEY (module_id, organization_id) REFERENCES registry_modules (id, organization_id) ON DELETE CASCADE,
    CONSTRAINT registry_module_ingestions_tag UNIQUE (module_id, tag),
    CHECK ((status = 'pending') = (settled_at IS NULL)),
    CHECK (status NOT IN ('errored', 'skipped') OR error_code IS NOT NULL)
);
CREATE INDEX registry_module_ingestions_organization ON registry_module_ingestions (organization_id);

ALTER TABLE workflow_dispatches DROP CONSTRAINT workflow_dispatches_kind_check,
    ADD CONSTRAINT workflow_dispatches_kind_check
    CHECK (kind IN ('policy-publication', 'source-ingestion', 'module-ingestion'));

-- +goose Down
DELETE FROM workflow_dispatches WHERE kind = 'module-ingestion';
ALTER TABLE workflow_dispatches DROP CONSTRAINT workflow_dispatches_kind_check,
    ADD CONSTRAINT workflow_dispatches_kind_check CHECK (kind IN ('policy-publication', 'source-ingestion'));
DROP TABLE registry_module_ingestions;
