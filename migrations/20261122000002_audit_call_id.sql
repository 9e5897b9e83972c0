-- The tool call's id (the `callID` the agent monitor sees). A row held through a database
-- outage is written again when the connection broke after the first write committed; the
-- unique id turns that second write into a no-op.
ALTER TABLE audit_log ADD COLUMN call_id UUID;
CREATE UNIQUE INDEX audit_log_call_id ON audit_log (call_id);
