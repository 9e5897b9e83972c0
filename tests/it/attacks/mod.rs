//! Issue 15's attacks, performed for real against a running apigate (real HTTP server, real
//! upstream, real Postgres where the mode needs it). Each test failed before its fix.
//!
//! - `leaks`: no credential reaches the agent (truncation, URL user-info, /health, binary bodies).
//! - `encoded`: no credential comes back through a compressed, UTF-16/32 or base64 body (issue 26).
//! - `exhaustion`: nothing unauthenticated, or cheap with one key, exhausts the server.
//! - `mcp_sessions`: an MCP session belongs to the key that opened it.
//! - `owners`: monitor sessions and approvals belong to their owner.
//! - `privileges`: key features, session tokens, method override, lockout, admin actions.
//! - `token_errors`: the OAuth token endpoint's error answer never shows the client secret
//!   (issue 26).

mod encoded;
mod exhaustion;
mod leaks;
mod mcp_sessions;
mod owners;
mod privileges;
mod token_errors;
