-- Issue 44, replicas: the limits every replica on this database shares. UNLOGGED: no WAL per
-- call, and a crash of the database empties them, which only forgives recent calls.

-- One GCRA bucket per limited subject (`auth/rate.rs`: a key, a session, a signed-in person,
-- argon2 verifications of one public id from one address, the refused-call audit rows of a
-- key). `subject` is a SHA-256 of what it limits, never the identity itself; `tat` is the
-- instant the bucket is full again; a bucket of `burst` calls refilled one per `period`
-- seconds admits a call when `tat` is at most (burst - 1) periods ahead of now. A check is
-- one `INSERT … ON CONFLICT … DO UPDATE … WHERE … RETURNING` over all the call's buckets
-- (`store/shared.rs`). A row whose `tat` has passed holds nothing a missing row would not, so
-- the purge task deletes them.
CREATE UNLOGGED TABLE rate_buckets (
    subject BYTEA PRIMARY KEY,
    tat     TIMESTAMPTZ NOT NULL,
    period  DOUBLE PRECISION NOT NULL,
    burst   DOUBLE PRECISION NOT NULL
);

-- The MCP sessions and `subscriptions/listen` streams each API key holds on every replica,
-- as leases: a replica renews its own while they live and deletes them when they end, so the
-- leases of a replica that died run out after their time to live (`http/sessions.rs`).
CREATE UNLOGGED TABLE session_leases (
    id         TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX session_leases_holder ON session_leases (holder, expires_at);

-- A new lease for `holder` unless it already holds `max_held` live ones; returns how many it
-- held before. One holder's takes are serialized (an advisory lock on its name), so replicas
-- admitting sessions of one key at once cannot together pass the cap.
CREATE FUNCTION apigate_lease_take(
    lease TEXT, lease_holder TEXT, max_held INTEGER, ttl DOUBLE PRECISION
) RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    held INTEGER;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('apigate.lease:' || lease_holder, 0));
    SELECT count(*) INTO held FROM session_leases
     WHERE holder = lease_holder AND expires_at > clock_timestamp();
    IF held < max_held THEN
        INSERT INTO session_leases (id, holder, expires_at)
        VALUES (lease, lease_holder, clock_timestamp() + make_interval(secs => ttl));
    END IF;
    RETURN held;
END
$$;

-- The agent monitor's per-session statistics (`sessionStats` of every event), counted once
-- for all replicas: a monitor session id is made from validated values, never a token.
-- `tools` is a bit set of the tools used.
CREATE UNLOGGED TABLE monitor_sessions (
    session_id    TEXT PRIMARY KEY,
    started_at    TIMESTAMPTZ NOT NULL,
    last_activity TIMESTAMPTZ NOT NULL,
    tool_calls    BIGINT NOT NULL,
    tools         INTEGER NOT NULL
);
CREATE INDEX monitor_sessions_activity ON monitor_sessions (last_activity);
