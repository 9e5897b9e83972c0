-- Stored upstream credentials name the API they are for (issue 41 §3). Each header's API is
-- sealed with it (auth/session_upstream.rs, format 2, still bound to the row id); these columns
-- hold the API names alone, for listings, and are deleted with the credentials (revocation,
-- expiry, clearing). A value sealed before (format 1) names no API: it is sent only while a
-- server serves exactly one API.
ALTER TABLE api_keys
    ADD COLUMN upstream_apis TEXT[],
    ADD CONSTRAINT api_keys_upstream_apis_only_sessions
        CHECK (kind = 'session' OR upstream_apis IS NULL);
ALTER TABLE oauth_users ADD COLUMN upstream_apis TEXT[];

-- The APIs the servers serve, as the last one to start or reload recorded them: what
-- `apigate sessions create` and the admin API check a credential's API against (with several
-- APIs, headers must name one). The one API of `--spec` has no name: ''.
CREATE TABLE served_apis (
    name TEXT PRIMARY KEY,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
