//! How the HTTP layer says no: [`ErrorCode`], every code a JSON error body of the HTTP layer
//! can carry (the tools' own [`Code`]s and the transport's), the `{error, code, …details}`
//! bodies ([`json_error`], [`ApiError`]), an authentication failure as a response
//! ([`auth_error_response`], for the tier-1 guard and the admin API alike), and the peer
//! address the audit log records ([`peer_ip`]).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::auth::AuthError;
use crate::tools::Code;

/// The `code` of an HTTP-level error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A code the tools use too (`UNAUTHORIZED`, `RATE_LIMITED`, …): written in one place.
    Tool(Code),
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
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Tool(code) => code.as_str(),
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::ForbiddenHost => "FORBIDDEN_HOST",
            ErrorCode::ForbiddenOrigin => "FORBIDDEN_ORIGIN",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::TooManySessions => "TOO_MANY_SESSIONS",
            ErrorCode::BadRequest => "BAD_REQUEST",
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::SessionTokenMismatch => "SESSION_TOKEN_MISMATCH",
            ErrorCode::SseQueueFull => "SSE_QUEUE_FULL",
            ErrorCode::SessionClosed => "SESSION_CLOSED",
            ErrorCode::MetricsUnavailable => "METRICS_UNAVAILABLE",
        }
    }
}

impl From<Code> for ErrorCode {
    fn from(code: Code) -> ErrorCode {
        ErrorCode::Tool(code)
    }
}

/// `{"error": message, "code": CODE}` with its status.
pub(crate) fn json_error(
    status: StatusCode,
    code: impl Into<ErrorCode>,
    message: &str,
) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// 413 for a request body over `--max-body-bytes` (`limit`).
pub(crate) fn too_large(limit: usize) -> Response {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::PayloadTooLarge,
        &format!(
            "request body is over the {limit}-byte limit (--max-body-bytes; base64 uploads count \
             against it)"
        ),
    )
}

/// The connection's peer address (the client, or the reverse proxy in front of apigate:
/// forwarding headers are not trusted). Absent when the server was not started with connect
/// info.
pub(crate) fn peer_ip(extensions: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The response for an authentication failure anywhere in the HTTP layer (e.g. the tier-1
/// middleware in front of `/mcp`): 401 / 403 / 429 (with `Retry-After`) / 503 and a JSON body
/// `{error, code, …details}`.
pub(crate) fn auth_error_response(e: AuthError) -> Response {
    ApiError::from(e).into_response()
}

/// An error body `{error, code, …details}` with its status.
pub(super) struct ApiError {
    pub(super) status: StatusCode,
    pub(super) code: ErrorCode,
    pub(super) message: String,
    pub(super) details: serde_json::Map<String, serde_json::Value>,
    pub(super) retry_after_secs: Option<u64>,
}

impl ApiError {
    pub(super) fn new(
        status: StatusCode,
        code: impl Into<ErrorCode>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code: code.into(),
            message: message.into(),
            details: serde_json::Map::new(),
            retry_after_secs: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::Map::new();
        body.insert("error".into(), self.message.into());
        body.insert("code".into(), self.code.as_str().into());
        body.extend(self.details);
        let mut resp = (self.status, Json(serde_json::Value::Object(body))).into_response();
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        let (status, code) = match &e {
            AuthError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, Code::Unauthorized),
            AuthError::SessionExpired => (StatusCode::UNAUTHORIZED, Code::SessionExpired),
            AuthError::Forbidden { .. } | AuthError::ReadOnly { .. } => {
                (StatusCode::FORBIDDEN, Code::Forbidden)
            }
            AuthError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, Code::RateLimited),
            AuthError::Unavailable(_)
            | AuthError::LimitsUnavailable
            | AuthError::Credentials(_) => (StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable),
        };
        let message = match &e {
            // Says the database cannot be reached; its error stays in the log.
            AuthError::Unavailable(_) => format!("{e}; try again later"),
            other => other.to_string(),
        };
        let mut error = ApiError::new(status, code, message);
        match e {
            AuthError::Forbidden { missing } => {
                error.details.insert("missing".into(), missing.into());
            }
            AuthError::ReadOnly { .. } => {
                error.details.insert("readOnly".into(), true.into());
            }
            AuthError::RateLimited { retry_after_ms } => {
                error
                    .details
                    .insert("retryAfterMs".into(), retry_after_ms.into());
                error.retry_after_secs = Some(retry_after_ms.div_ceil(1000));
            }
            _ => {}
        }
        error
    }
}
