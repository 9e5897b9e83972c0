//! Issue 15's attacks, performed for real against a running apigate (real HTTP server, real
//! upstream, real Postgres where the mode needs it). Each test failed before its fix.
//!
//! - `leaks`: no credential reaches the agent (truncation, URL user-info, /health, binary bodies).
//! - `exhaustion`: nothing unauthenticated, or cheap with one key, exhausts the server.
//! - `mcp_sessions`: an MCP session belongs to the key that opened it.
//! - `owners`: monitor sessions and approvals belong to their owner.
//! - `privileges`: key features, session tokens, method override, lockout, admin actions.
//!
//! Issue 26's second round:
//!
//! - `requests`: what an agent shapes (form `_method`, a credential's query name, free-form
//!   query objects, redirects with an identity assertion, hidden operations' schemas).
//! - `session_bounds`: a session's stored headers, monitor rates per key, legacy SSE pinning.

mod exhaustion;
mod leaks;
mod mcp_sessions;
mod owners;
mod privileges;
mod requests;
mod session_bounds;
