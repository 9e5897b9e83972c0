-- Server keys, session tokens, roles and the audit log (DESIGN.md §3).

CREATE TABLE roles (
    name        TEXT PRIMARY KEY CHECK (name <> ''),
    features    TEXT[] NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One table for both credential kinds, as in the reference design: a server key is found by
-- its public id and verified against an argon2id PHC string; a session is found by the
-- SHA-256 digest of its token. Neither secret is ever stored.
CREATE TABLE api_keys (
    id               UUID PRIMARY KEY,
    kind             TEXT NOT NULL CHECK (kind IN ('server_key', 'session')),
    name             TEXT,
    public_id        TEXT UNIQUE,
    secret_hash      TEXT,
    token_digest     BYTEA UNIQUE,
    features         TEXT[] NOT NULL DEFAULT '{}',
    roles            TEXT[] NOT NULL DEFAULT '{}',
    read_only        BOOLEAN NOT NULL DEFAULT false,
    user_id          TEXT,
    tenant_id        TEXT,
    organization_id  TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at       TIMESTAMPTZ,
    revoked_at       TIMESTAMPTZ,
    last_used_at     TIMESTAMPTZ,
    created_by       TEXT,
    CONSTRAINT api_keys_kind_shape CHECK (
        (kind = 'server_key' AND public_id IS NOT NULL AND secret_hash IS NOT NULL
            AND token_digest IS NULL AND name IS NOT NULL)
        OR
        (kind = 'session' AND token_digest IS NOT NULL AND public_id IS NULL
            AND secret_hash IS NULL AND user_id IS NOT NULL AND expires_at IS NOT NULL)
    )
);

CREATE INDEX api_keys_kind_created ON api_keys (kind, created_at);

-- One row per tool call. Never argument values or bodies: `path` is the operation's template.
CREATE TABLE audit_log (
    id               BIGSERIAL PRIMARY KEY,
    at               TIMESTAMPTZ NOT NULL DEFAULT now(),
    key_id           UUID,
    session_id       UUID,
    user_id          TEXT,
    tenant_id        TEXT,
    tool             TEXT NOT NULL,
    operation        TEXT,
    method           TEXT,
    path             TEXT,
    decision         TEXT NOT NULL,
    upstream_status  INTEGER,
    duration_ms      BIGINT NOT NULL,
    error_code       TEXT
);

CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_session ON audit_log (session_id, at);
