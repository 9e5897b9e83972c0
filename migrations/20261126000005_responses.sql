-- Issue 27, binary out: binary API responses held for MCP `resources/read`
-- (`apigate://responses/<id>`), so that any replica can serve a read. Each row belongs to the
-- API key that made the call (`owner`: `key:<key id>`, or the fingerprint of a key with no row,
-- such as the bootstrap key) and is readable until `expires_at`. Bounded per owner by the
-- server (`--max-held-bytes`, oldest rows by `seq` dropped first); expired rows are deleted
-- on every write.
CREATE TABLE held_responses (
    id           TEXT PRIMARY KEY,
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    owner        TEXT NOT NULL,
    content_type TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    size         BIGINT NOT NULL,
    bytes        BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX held_responses_owner ON held_responses (owner, seq);
CREATE INDEX held_responses_expires ON held_responses (expires_at);
