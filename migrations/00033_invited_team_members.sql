-- +goose Up

-- A membership remembers the invitation it came from, so that its /api/v2
-- ID (ou-{organization}.{invitation}) stays the one the invitation had.
-- No foreign key: invitations are swept after they close, and the ID must
-- outlive the row.
ALTER TABLE memberships ADD COLUMN invitation_id text;
CREATE UNIQUE INDEX memberships_invitation_key ON memberships (organization_id, invitation_id)
    WHERE invitation_id IS NOT NULL;
UPDATE memberships m SET invitation_id = i.id
FROM (SELECT DISTINCT ON (organization_id, closed_by) id, organization_id, closed_by
      FROM invitations WHERE status = 'accepted'
      ORDER BY organization_id, closed_by, closed_at DESC, id) i
WHERE i.organization_id = m.organization_id AND i.closed_by = m.user_id;

-- The installation operator, which administers every organization on
-- /api/v2 and has no account, invites too: its invitations name no
-- inviter, and its authority does not lapse before acceptance.
ALTER TABLE invitations ALTER COLUMN inviter_id DROP NOT NULL;

-- Invited people can be put in teams before they join (HCP Terraform
-- allows it). The row turns into a team membership in the accepting
-- transaction and is deleted when the invitation is canceled or declined;
-- an expired invitation's rows stop counting at once (readers join the
-- pending, unexpired invitation) and go with the invitation when it is
-- swept.
ALTER TABLE invitations ADD CONSTRAINT invitations_id_organization_key UNIQUE (id, organization_id);
CREATE TABLE team_invitations (
    team_id         text        NOT NULL,
    organization_id text        NOT NULL,
    invitation_id   text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, invitation_id),
    FOREIGN KEY (team_id, organization_id) REFERENCES teams (id, organization_id) ON DELETE CASCADE,
    FOREIGN KEY (invitation_id, organization_id) REFERENCES invitations (id, organization_id) ON DELETE CASCADE
);
CREATE INDEX team_invitations_invitation ON team_invitations (invitation_id);

-- +goose Down
DROP TABLE team_invitations;
ALTER TABLE invitations DROP CONSTRAINT invitations_id_organization_key;
DELETE FROM invitations WHERE inviter_id IS NULL;
ALTER TABLE invitations ALTER COLUMN inviter_id SET NOT NULL;
DROP INDEX memberships_invitation_key;
ALTER TABLE memberships DROP COLUMN invitation_id;
