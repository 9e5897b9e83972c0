//! [`Code`]: every stable code apigate writes, in one table with the HTTP status an error body
//! carrying it answers with and who reads it ([`Kind`]). A tool result, an HTTP error body and
//! an audit row all take their code from here; no other file writes a code as a string.

use http::StatusCode;

/// A stable, machine-readable code an agent, an operator's script or the audit log can
/// branch on (`docs/design.md` lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    NotFound,
    Conflict,
    ForbiddenHost,
    ForbiddenOrigin,
    PayloadTooLarge,
    TooManySessions,
    BadRequest,
    SessionNotFound,
    SessionTokenMismatch,
    SseQueueFull,
    SessionClosed,
    MetricsUnavailable,
    /// `POST /admin/v1/reload` (or SIGHUP, a watched file) could not load the new APIs; the
    /// running ones stay.
    ReloadFailed,
    /// The audit log's row for a call its client cancelled, or the drain cut.
    Cancelled,
    /// The audit log's row that stands for refused calls it did not record one by one.
    AuditSuppressed,
}

/// Who reads a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tool call can end with it (the tools' output schema lists these); so can an HTTP
    /// error body.
    Tool,
    /// Only an HTTP error body carries it (the transport, the admin API).
    Http,
    /// Only an audit row carries it.
    Audit,
}

impl Code {
    /// Every code, tools' first in the order `docs/design.md` lists them.
    pub const ALL: [Code; 27] = [
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
        Code::NotFound,
        Code::Conflict,
        Code::ForbiddenHost,
        Code::ForbiddenOrigin,
        Code::PayloadTooLarge,
        Code::TooManySessions,
        Code::BadRequest,
        Code::SessionNotFound,
        Code::SessionTokenMismatch,
        Code::SseQueueFull,
        Code::SessionClosed,
        Code::MetricsUnavailable,
        Code::ReloadFailed,
        Code::Cancelled,
        Code::AuditSuppressed,
    ];

    /// The table: the code as it is written, the status of an HTTP error body carrying it,
    /// and who reads it.
    fn entry(self) -> (&'static str, StatusCode, Kind) {
        use Kind::{Audit, Http, Tool};
        match self {
            Code::Unauthorized => ("UNAUTHORIZED", StatusCode::UNAUTHORIZED, Tool),
            Code::SessionExpired => ("SESSION_EXPIRED", StatusCode::UNAUTHORIZED, Tool),
            Code::Forbidden => ("FORBIDDEN", StatusCode::FORBIDDEN, Tool),
            Code::RateLimited => ("RATE_LIMITED", StatusCode::TOO_MANY_REQUESTS, Tool),
            Code::UnknownTool => ("UNKNOWN_TOOL", StatusCode::NOT_FOUND, Tool),
            Code::UnknownOperation => ("UNKNOWN_OPERATION", StatusCode::NOT_FOUND, Tool),
            Code::InvalidArguments => ("INVALID_ARGUMENTS", StatusCode::BAD_REQUEST, Tool),
            Code::BlockedByMonitor => ("BLOCKED_BY_MONITOR", StatusCode::FORBIDDEN, Tool),
            Code::UpstreamError => ("UPSTREAM_ERROR", StatusCode::BAD_GATEWAY, Tool),
            Code::UpstreamTimeout => ("UPSTREAM_TIMEOUT", StatusCode::GATEWAY_TIMEOUT, Tool),
            Code::Unavailable => ("UNAVAILABLE", StatusCode::SERVICE_UNAVAILABLE, Tool),
            Code::Internal => ("INTERNAL", StatusCode::INTERNAL_SERVER_ERROR, Tool),
            Code::NotFound => ("NOT_FOUND", StatusCode::NOT_FOUND, Http),
            Code::Conflict => ("CONFLICT", StatusCode::CONFLICT, Http),
            Code::ForbiddenHost => ("FORBIDDEN_HOST", StatusCode::FORBIDDEN, Http),
            Code::ForbiddenOrigin => ("FORBIDDEN_ORIGIN", StatusCode::FORBIDDEN, Http),
            Code::PayloadTooLarge => ("PAYLOAD_TOO_LARGE", StatusCode::PAYLOAD_TOO_LARGE, Http),
            Code::TooManySessions => ("TOO_MANY_SESSIONS", StatusCode::TOO_MANY_REQUESTS, Http),
            Code::BadRequest => ("BAD_REQUEST", StatusCode::BAD_REQUEST, Http),
            Code::SessionNotFound => ("SESSION_NOT_FOUND", StatusCode::NOT_FOUND, Http),
            Code::SessionTokenMismatch => ("SESSION_TOKEN_MISMATCH", StatusCode::FORBIDDEN, Http),
            Code::SseQueueFull => ("SSE_QUEUE_FULL", StatusCode::TOO_MANY_REQUESTS, Http),
            Code::SessionClosed => ("SESSION_CLOSED", StatusCode::GONE, Http),
            Code::MetricsUnavailable => {
                ("METRICS_UNAVAILABLE", StatusCode::SERVICE_UNAVAILABLE, Http)
            }
            Code::ReloadFailed => ("RELOAD_FAILED", StatusCode::UNPROCESSABLE_ENTITY, Http),
            Code::Cancelled => ("CANCELLED", StatusCode::INTERNAL_SERVER_ERROR, Audit),
            Code::AuditSuppressed => ("AUDIT_SUPPRESSED", StatusCode::TOO_MANY_REQUESTS, Audit),
        }
    }

    /// The code as it is written: the one place these strings are.
    pub fn as_str(self) -> &'static str {
        self.entry().0
    }

    /// The status of an HTTP error body with this code.
    pub fn status(self) -> StatusCode {
        self.entry().1
    }

    pub fn kind(self) -> Kind {
        self.entry().2
    }

    /// The code written `s` (an audit row's, read back).
    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether a call ending with it was refused (audit `denied`) rather than failed.
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

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The schema of a tool result's `code`: the codes a tool call can end with.
impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Code".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<&str> = Code::ALL
            .iter()
            .filter(|c| c.kind() == Kind::Tool)
            .map(|c| c.as_str())
            .collect();
        schemars::json_schema!({"type": "string", "enum": codes})
    }
}

#[cfg(test)]
#[test]
fn every_code_is_written_once_and_reads_back() {
    let mut names: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Code::ALL.len());
    for c in Code::ALL {
        assert_eq!(Code::parse(c.as_str()), Some(c));
    }
    assert_eq!(Code::parse("OK"), None);
}
