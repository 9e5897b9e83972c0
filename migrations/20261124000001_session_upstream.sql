-- A session's own upstream credentials (issue 18 §1): the headers sealed with AES-256-GCM under
-- the server's secret key, bound to the session id (auth/sealed.rs), and their names alone for
-- listings. Never a value in clear. Both are set to NULL when the session is revoked or has
-- expired: a purge, not a flag.
ALTER TABLE api_keys
    ADD COLUMN upstream_headers BYTEA,
    ADD COLUMN upstream_header_names TEXT[],
    ADD CONSTRAINT api_keys_upstream_only_sessions
        CHECK (kind = 'session' OR (upstream_headers IS NULL AND upstream_header_names IS NULL));
