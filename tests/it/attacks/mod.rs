//! Issue 15's (and issue 26's) attacks, performed for real against a running apigate (real HTTP server, real
//! upstream, real Postgres where the mode needs it). Each test failed before its fix.
//!
//! - `leaks`: no credential reaches the agent (truncation, URL user-info, /health, binary bodies).
//! - `forged_text`: agent- and admin-chosen text cannot forge rows or drive the terminal.
//! - `exhaustion`: nothing unauthenticated, or cheap with one key, exhausts the server.
//! - `mcp_sessions`: an MCP session belongs to the key that opened it.
//! - `owners`: monitor sessions and approvals belong to their owner.
//! - `privileges`: key features, session tokens, method override, lockout, admin actions.
//! - `refusals`: refused calls spend the key's budget; refusals are audited, boundedly.
//! - `roles`: an admin changes only roles whose features it fully holds.

mod exhaustion;
mod forged_text;
mod leaks;
mod mcp_sessions;
mod owners;
mod privileges;
mod refusals;
mod roles;
