//! Issue 15's attacks, performed for real against a running apigate (real HTTP server, real
//! upstream, real Postgres where the mode needs it). Each test failed before its fix.
//!
//! - `leaks`: no credential reaches the agent (truncation, URL user-info, /health, binary bodies).
//! - `exhaustion`: nothing unauthenticated, or cheap with one key, exhausts the server.
//! - `mcp_sessions`: an MCP session belongs to the key that opened it.
//! - `owners`: monitor sessions and approvals belong to their owner.
//! - `privileges`: key features, session tokens, method override, lockout, admin actions.

mod exhaustion;
mod leaks;
mod mcp_sessions;
mod owners;
mod privileges;
