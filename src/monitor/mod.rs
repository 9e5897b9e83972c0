//! The agent-monitor protocol (`docs/monitor-protocol.md`, `docs/design.md`):
//! the client gate every tool call passes when `--monitor URL` is given (fail-closed), and
//! the reference monitor server (`apigate monitor`: rules, approvals, live dashboard).
//!
//! `client` uses reqwest only; `server` is the only axum user here; `rules` is pure logic.

mod client;
pub mod rules;
mod server;

pub use client::{
    BlockCause, Blocked, DEFAULT_TIMEOUT, MAX_ARG_CHARS, Monitor, MonitorConfig, MonitorError,
    MonitorFlags, OperationRef, ToolCall, parse_duration, preview, sanitize_args,
};
pub use rules::RuleSet;
pub use server::{MonitorArgs, RunningMonitor, ServerConfig, run, spawn};
