//! How the HTTP layer says no: the `{error, code, …details}` bodies, their code and status
//! from the one [`Code`] table ([`json_error`], [`ApiError`]), an authentication failure as a response
//! ([`auth_error_response`], for the tier-1 guard and the admin API alike), and the peer
//! address the audit log records ([`peer_ip`]).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::apis::reload::ReloadError;
use crate::auth::AuthError;
use crate::types::Code;

/// `{"error": message, "code": CODE}` with its status.
pub(crate) fn json_error(code: Code, message: &str) -> Response {
    ApiError::new(code, message).into_response()
}

/// 413 for a request body over `--max-body-bytes` (`limit`).
pub(crate) fn too_large(limit: usize) -> Response {
    json_error(
        Code::PayloadTooLarge,
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
    pub(super) code: Code,
    pub(super) message: String,
    pub(super) details: serde_json::Map<String, serde_json::Value>,
    pub(super) retry_after_secs: Option<u64>,
}

impl ApiError {
    /// An error body with `code`, answered with the code's status.
    pub(super) fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            status: code.status(),
            code,
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

/// 429 within a second of the last reload, 422 when the APIs did not reload (the running
/// version serves on).
impl From<ReloadError> for ApiError {
    fn from(e: ReloadError) -> ApiError {
        let message = e.to_string();
        match e {
            ReloadError::TooSoon => {
                let mut error = ApiError::new(Code::RateLimited, message);
                error.details.insert("retryAfterMs".into(), 1000.into());
                error
            }
            ReloadError::Failed(_) => ApiError::new(Code::ReloadFailed, message),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        let code = match &e {
            AuthError::Unauthorized(_) => Code::Unauthorized,
            AuthError::SessionExpired => Code::SessionExpired,
            AuthError::Forbidden { .. } | AuthError::ReadOnly { .. } => Code::Forbidden,
            AuthError::RateLimited { .. } => Code::RateLimited,
            AuthError::Unavailable(_)
            | AuthError::LimitsUnavailable
            | AuthError::Credentials(_) => Code::Unavailable,
        };
        let message = match &e {
            // Says the database cannot be reached; its error stays in the log.
            AuthError::Unavailable(_) => format!("{e}; try again later"),
            other => other.to_string(),
        };
        let mut error = ApiError::new(code, message);
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
