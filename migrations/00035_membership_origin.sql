-- +goose Up

-- How a person arrived in an organization, shown to its owners beside each
-- member: created it or accepted an invitation after a password sign-in
-- ('password'), was added just in time by an SSO sign-in ('sso'), or was
-- provisioned by the organization's SCIM client ('scim').
ALTER TABLE memberships ADD COLUMN joined_via text NOT NULL DEFAULT 'password'
    CHECK (joined_via IN ('password', 'sso', 'scim'));

-- Why a person was deactivated (banned_at set): shown to owners, never to
-- the person. SCIM's active=false writes it; reactivation clears both.
ALTER TABLE users ADD COLUMN banned_reason text;

-- +goose Down
ALTER TABLE users DROP COLUMN banned_reason;
ALTER TABLE memberships DROP COLUMN joined_via;
