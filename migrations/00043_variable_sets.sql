-- +goose Up

-- A set's workspaces and projects must be of its own organization: the
-- scope tables refer to (organization_id, id), which these indexes make a
-- key.
CREATE UNIQUE INDEX IF NOT EXISTS workspaces_organization_id_key ON workspaces (organization_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS projects_organization_id_key ON projects (organization_id, id);

-- Variable sets: variables an organization applies to every workspace
-- (global), to the workspaces of listed projects, or to listed workspaces.
-- A priority set's values win over everything a run is given, run
-- variables included.
CREATE TABLE variable_sets (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL REFERENCES organizations (id),
    name            text        NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 512),
    global          boolean     NOT NULL DEFAULT false,
    priority        boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, id)
);
CREATE UNIQUE INDEX variable_sets_organization_name_key ON variable_sets (organization_id, lower(name));

-- Scope rows go with their project or workspace.
CREATE TABLE variable_set_projects (
    variable_set_id text        NOT NULL,
    organization_id text        NOT NULL,
    project_id      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (variable_set_id, project_id),
    FOREIGN KEY (organization_id, variable_set_id) REFERENCES variable_sets (organization_id, id) ON DELETE CASCADE,
    FOREIGN KEY (organization_id, project_id) REFERENCES projects (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX variable_set_projects_project ON variable_set_projects (project_id);

CREATE TABLE variable_set_workspaces (
    variable_set_id text        NOT NULL,
    organization_id text        NOT NULL,
    workspace_id    text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (variable_set_id, workspace_id),
    FOREIGN KEY (organization_id, variable_set_id) REFERENCES variable_sets (organization_id, id) ON DELETE CASCADE,
    FOREIGN KEY (organization_id, workspace_id) REFERENCES workspaces (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX variable_set_workspaces_workspace ON variable_set_workspaces (workspace_id);

-- A set's variables, stored like workspace variables: a sensitive value
-- only sealed (bound to its variable and value version), never in clear.
CREATE TABLE variable_set_variables (
    id              text        PRIMARY KEY,
    organization_id text        NOT NULL,
    variable_set_id text        NOT NULL,
    key             text        NOT NULL CHECK (key ~ '^[A-Za-z_][A-Za-z0-9_-]{0,127}$'),
    category        text        NOT NULL CHECK (category IN ('terraform', 'env')),
    value           text,
    sealed_value    bytea,
    sensitive       boolean     NOT NULL,
    hcl             boolean     NOT NULL DEFAULT false,
    description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 512),
    value_version   integer     NOT NULL DEFAULT 1,
    value_digest    bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (organization_id, variable_set_id) REFERENCES variable_sets (organization_id, id) ON DELETE CASCADE,
    CHECK ((sensitive AND value IS NULL AND sealed_value IS NOT NULL) OR
           (NOT sensitive AND value IS NOT NULL AND sealed_value IS NULL)),
    -- An environment variable is a plain string; its name is a shell name.
    CHECK (category = 'terraform' OR (NOT hcl AND key ~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'))
);
CREATE UNIQUE INDEX variable_set_variables_set_category_key ON variable_set_variables (variable_set_id, category, key);

-- +goose Down
DROP TABLE variable_set_variables;
DROP TABLE variable_set_workspaces;
DROP TABLE variable_set_projects;
DROP TABLE variable_sets;
DROP INDEX IF EXISTS projects_organization_id_key;
DROP INDEX IF EXISTS workspaces_organization_id_key;
