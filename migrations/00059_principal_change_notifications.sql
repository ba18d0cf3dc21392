-- +goose Up

-- cairn-api keeps the principal of each recently presented session, user
-- token and agent access token in memory, so a request does not read its
-- credential, membership and team grants again. Every statement that
-- changes a row those reads depend on notifies cairn_principals when its
-- transaction commits, whichever process or code path wrote it, and every
-- API process then forgets every principal it kept. The payload is empty:
-- PostgreSQL folds the notifications of one transaction into one.
-- +goose StatementBegin
CREATE FUNCTION notify_principals_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cairn_principals', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER users_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER memberships_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memberships
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER sessions_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sessions
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER user_tokens_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON user_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER oauth_grants_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON oauth_grants
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER oauth_access_tokens_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON oauth_access_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER teams_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON teams
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER team_members_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_members
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER team_workspace_access_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_workspace_access
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER team_project_access_principals_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_project_access
    FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();

-- +goose Down
DROP TRIGGER users_principals_changed ON users;
DROP TRIGGER memberships_principals_changed ON memberships;
DROP TRIGGER sessions_principals_changed ON sessions;
DROP TRIGGER user_tokens_principals_changed ON user_tokens;
DROP TRIGGER oauth_grants_principals_changed ON oauth_grants;
DROP TRIGGER oauth_access_tokens_principals_changed ON oauth_access_tokens;
DROP TRIGGER teams_principals_changed ON teams;
DROP TRIGGER team_members_principals_changed ON team_members;
DROP TRIGGER team_workspace_access_principals_changed ON team_workspace_access;
DROP TRIGGER team_project_access_principals_changed ON team_project_access;
DROP FUNCTION notify_principals_changed();
