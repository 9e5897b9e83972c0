-- Admin actions (creating and revoking keys and sessions, setting roles) are audited too: who
-- acted (`key:<public id>`, `bootstrap`, `cli`) and on what (`key:<public id>`,
-- `session:<id>`, `role:<name>`), never a key or a token. Tool calls record their key as actor.
ALTER TABLE audit_log ADD COLUMN actor TEXT, ADD COLUMN target TEXT;
