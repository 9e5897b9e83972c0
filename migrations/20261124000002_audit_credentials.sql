-- Issue 18, audit: where each call's upstream credentials came from (`server`, `session`,
-- `oauth`, `assertion`, `scheme:NAME`; never a value), and the subject's organization next to
-- its user and tenant. The actor is `actor` (20261122000003), the call id (the identity
-- assertion's `jti`) is `call_id` (20261122000002).
ALTER TABLE audit_log
    ADD COLUMN credential_sources TEXT[] NOT NULL DEFAULT '{}',
    ADD COLUMN organization_id TEXT;
