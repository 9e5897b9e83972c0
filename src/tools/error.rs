//! `ToolError`: a tool that ran and failed, with a stable machine-readable code. Adapters turn
//! it into an MCP result with `isError: true` and `{"error", "code", …details}`.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::spec::Violation;

/// The stable error codes an agent can branch on (`docs/design.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Unauthorized,
    SessionExpired,
    Forbidden,
    RateLimited,
    UnknownTool,
    UnknownOperation,
    InvalidArguments,
    BlockedByMonitor,
    UpstreamError,
    UpstreamTimeout,
    /// A dependency (the database) is down; try again.
    Unavailable,
    Internal,
}

impl Code {
    /// Every code, in the order `docs/design.md` lists them.
    pub const ALL: [Code; 12] = [
        Code::Unauthorized,
        Code::SessionExpired,
        Code::Forbidden,
        Code::RateLimited,
        Code::UnknownTool,
        Code::UnknownOperation,
        Code::InvalidArguments,
        Code::BlockedByMonitor,
        Code::UpstreamError,
        Code::UpstreamTimeout,
        Code::Unavailable,
        Code::Internal,
    ];

    /// The code as an agent reads it: the one place these strings are written.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unauthorized => "UNAUTHORIZED",
            Code::SessionExpired => "SESSION_EXPIRED",
            Code::Forbidden => "FORBIDDEN",
            Code::RateLimited => "RATE_LIMITED",
            Code::UnknownTool => "UNKNOWN_TOOL",
            Code::UnknownOperation => "UNKNOWN_OPERATION",
            Code::InvalidArguments => "INVALID_ARGUMENTS",
            Code::BlockedByMonitor => "BLOCKED_BY_MONITOR",
            Code::UpstreamError => "UPSTREAM_ERROR",
            Code::UpstreamTimeout => "UPSTREAM_TIMEOUT",
            Code::Unavailable => "UNAVAILABLE",
            Code::Internal => "INTERNAL",
        }
    }

    /// Whether the call was refused (audit `denied`) rather than failed.
    pub(crate) fn is_denial(self) -> bool {
        matches!(
            self,
            Code::Unauthorized
                | Code::SessionExpired
                | Code::Forbidden
                | Code::RateLimited
                | Code::BlockedByMonitor
        )
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Code".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        schemars::json_schema!({"type": "string", "enum": codes})
    }
}

/// A failed tool call: what happened and what to do, plus structured details.
#[derive(Debug, Clone)]
pub struct ToolError {
    pub code: Code,
    pub message: String,
    pub details: Map<String, Value>,
}

impl ToolError {
    pub fn new(code: Code, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: Value) -> ToolError {
        self.details.insert(key.to_string(), value);
        self
    }

    /// `INVALID_ARGUMENTS` in its one shape: what to fix, and every violation with its pointer.
    pub fn invalid(message: impl Into<String>, violations: Vec<Violation>) -> ToolError {
        ToolError::new(Code::InvalidArguments, message).with("violations", json!(violations))
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}
