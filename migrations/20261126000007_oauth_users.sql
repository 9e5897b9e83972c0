-- People who signed in with a bearer token from a trusted issuer (issue 31): who (the token's
-- issuer and `sub`), through which client last, when first and last seen (to the credential
-- cache's lifetime), and their own upstream credentials, sealed as a session's are
-- (auth/sealed.rs, bound to the row's id) with their names alone for listings. A user's
-- credentials are keyed by issuer and subject: `sub` is unique only within its issuer.
CREATE TABLE oauth_users (
    id UUID PRIMARY KEY,
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    client_id TEXT,
    first_seen TIMESTAMPTZ,
    last_seen TIMESTAMPTZ,
    upstream_headers BYTEA,
    upstream_header_names TEXT[],
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (issuer, subject)
);
CREATE INDEX oauth_users_last_seen ON oauth_users (last_seen DESC NULLS LAST);
