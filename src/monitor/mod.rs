//! The agent-monitor protocol (`docs/monitor-protocol.md`, `docs/design.md`):
//! the client gate every tool call passes when `--monitor URL` is given (fail-closed), and
//! the reference monitor server (`apigate monitor`: rules, approvals, live dashboard).
//!
//! - `protocol`: the events and the decision, one serde type for client and server;
//! - `sanitize`: what of a call's arguments and request may leave apigate;
//! - `session_id`: the `sessionID` apigate gives a session (made from what it validated);
//! - `client`: the gate (reqwest only); `server`: the reference monitor (the only axum user
//!   here); `rules`: its pure decision logic; `duration`: how durations are written.
//!
//! The clap types (`apigate monitor`, `--monitor …`) are in `cli::monitor`.

mod client;
pub mod protocol;
pub mod rules;
mod sanitize;
mod server;
mod session_id;

pub use client::{BlockCause, Blocked, Monitor, MonitorConfig, MonitorError, ToolCall};
pub use rules::RuleSet;
pub use sanitize::{MAX_ARG_CHARS, OperationRef, preview, sanitize_args};
pub use server::{RunningMonitor, ServerConfig, spawn};
pub(crate) use session_id::monitor_session_id;
