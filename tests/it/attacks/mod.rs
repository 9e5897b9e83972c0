//! Issue 15's and issue 26's attacks, performed for real against a running apigate (real HTTP
//! server, real upstream, real Postgres where the mode needs it). Each test failed before its
//! fix.
//!
//! - `leaks`: no credential reaches the agent (truncation, URL user-info, /health, binary bodies).
//! - `encoded`: no credential comes back through a compressed, UTF-16/32 or base64 body.
//! - `forged_text`: agent- and admin-chosen text cannot forge rows or drive the terminal.
//! - `exhaustion`: nothing unauthenticated, or cheap with one key, exhausts the server.
//! - `mcp_sessions`: an MCP session belongs to the key that opened it.
//! - `owners`: monitor sessions and approvals belong to their owner.
//! - `privileges`: key features, session tokens, method override, lockout, admin actions.
//! - `refusals`: refused calls spend the key's budget; refusals are audited, boundedly.
//! - `requests`: what an agent shapes (form `_method`, a credential's query name, free-form
//!   query objects, redirects with an identity assertion, hidden operations' schemas).
//! - `roles`: an admin changes only roles whose features it fully holds.
//! - `session_bounds`: a session's stored headers, monitor rates per key, legacy SSE pinning.
//! - `token_errors`: the OAuth token endpoint's error answer never shows the client secret.

mod encoded;
mod exhaustion;
mod forged_text;
mod leaks;
mod mcp_sessions;
mod owners;
mod privileges;
mod refusals;
mod requests;
mod roles;
mod session_bounds;
mod token_errors;
