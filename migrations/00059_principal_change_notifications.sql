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

-- One statement-level trigger per table a cached principal is read from;
-- authcache.Untriggered checks each cached query's plan against them.
-- +goose StatementBegin
DO $$
DECLARE
    watched text;
BEGIN
    FOREACH watched IN ARRAY ARRAY['users', 'memberships', 'sessions', 'user_tokens', 'oauth_grants',
        'oauth_access_tokens', 'teams', 'team_members', 'team_workspace_access', 'team_project_access'] LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I '
            'FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed()', watched || '_principals_changed', watched);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- The triggers depend on the function and go with it.
DROP FUNCTION notify_principals_changed() CASCADE;
