//! `ToolError`: a tool that ran and failed, with a stable machine-readable code. Adapters turn
//! it into an MCP result with `isError: true` and `{"error", "code", …details}`.

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
    pub fn is_denial(self) -> bool {
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

    /// `{"error": message, "code": CODE, ...details}`.
    pub fn to_json(&self) -> Value {
        let mut out = json!({"error": self.message, "code": self.code.as_str()});
        if let Value::Object(map) = &mut out {
            for (k, v) in &self.details {
                map.insert(k.clone(), v.clone());
            }
        }
        out
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}
