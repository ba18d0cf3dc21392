-- +goose Up

-- A person's API token may be account-wide (organization_id NULL), as HCP
-- Terraform's user tokens are: it acts in an organization only through the
-- live membership its person holds there, resolved per request.
ALTER TABLE user_tokens ALTER COLUMN organization_id DROP NOT NULL;

-- HCP's allow-force-delete-workspaces: whether workspace admins, not only
-- owners, may delete a workspace that still manages resources.
ALTER TABLE organizations ADD COLUMN allow_force_delete_workspaces boolean NOT NULL DEFAULT false;

-- +goose Down

DELETE FROM user_tokens WHERE organization_id IS NULL;
ALTER TABLE user_tokens ALTER COLUMN organization_id SET NOT NULL;
ALTER TABLE organizations DROP COLUMN allow_force_delete_workspaces;
