//! `ToolError`: a tool that ran and failed, with a stable machine-readable code
//! ([`crate::types::Code`]). Adapters turn it into an MCP result with `isError: true` and
//! `{"error", "code", …details}`.

use serde_json::{Map, Value, json};

use crate::auth::AuthError;
use crate::spec::Violation;
use crate::types::Code;

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

/// An auth failure as a tool error, with the details an agent can act on.
impl From<AuthError> for ToolError {
    fn from(e: AuthError) -> ToolError {
        let message = e.to_string();
        match e {
            AuthError::Unauthorized(_) => ToolError::new(Code::Unauthorized, message),
            AuthError::SessionExpired => ToolError::new(Code::SessionExpired, message),
            AuthError::Forbidden { missing } => {
                ToolError::new(Code::Forbidden, message).with("missing", Value::String(missing))
            }
            AuthError::ReadOnly { .. } => {
                ToolError::new(Code::Forbidden, message).with("readOnly", Value::Bool(true))
            }
            AuthError::RateLimited { retry_after_ms } => ToolError::new(Code::RateLimited, message)
                .with("retryAfterMs", Value::from(retry_after_ms)),
            AuthError::Unavailable(_)
            | AuthError::LimitsUnavailable
            | AuthError::Credentials(_) => ToolError::new(Code::Unavailable, message),
        }
    }
}
