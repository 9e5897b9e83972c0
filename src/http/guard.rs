//! Middleware in front of every route: `Host` and `Origin` validation against DNS rebinding
//! (403), and the tier-1 `x-api-key` check (401 with a JSON body) before any MCP handling.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::{ApiError, auth_error_response, json_error, peer_ip};
use crate::auth::Auth;
use crate::auth::oauth::{MAX_TOKEN_BYTES, OAuthError, ResourceServer};
use crate::mcp::{HttpCaller, fingerprint};
use crate::secrets_equal;
use crate::types::Code;
use crate::types::{AuthMode, Tool};

/// Host names accepted by default: loopback only, any port.
pub(crate) const DEFAULT_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// Which `Host` and `Origin` values may reach the server.
#[derive(Debug, Clone)]
pub struct Allowed {
    /// `name` (any port) or `name:port`.
    pub hosts: Vec<String>,
    /// `scheme://name` (any port), `scheme://name:port` or `scheme://name:*`; `null` for the
    /// browser's opaque origin. Empty: only origins whose host is an allowed host.
    pub origins: Vec<String>,
}

impl Default for Allowed {
    fn default() -> Self {
        Allowed {
            hosts: DEFAULT_HOSTS.iter().map(|s| s.to_string()).collect(),
            origins: Vec::new(),
        }
    }
}

/// Splits `host[:port]` (IPv6 in brackets) into lower-case host and optional port.
fn split_authority(authority: &str) -> (String, Option<u16>) {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(rest) = a.strip_prefix('[')
        && let Some((h, tail)) = rest.split_once(']')
    {
        let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
        return (h.to_string(), port);
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h.to_string(), p.parse().ok()),
        _ => (a.clone(), None),
    }
}

impl Allowed {
    fn host_ok(&self, authority: &str) -> bool {
        let (host, port) = split_authority(authority);
        self.hosts.iter().any(|allowed| {
            let (h, p) = split_authority(allowed);
            h == host && (p.is_none() || p == port)
        })
    }

    fn origin_ok(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        if origin == "null" {
            return self.origins.iter().any(|o| o == "null");
        }
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        if self.origins.is_empty() {
            return matches!(scheme, "http" | "https") && self.host_ok(authority);
        }
        let (host, port) = split_authority(authority);
        self.origins.iter().any(|allowed| {
            let allowed = allowed.to_ascii_lowercase();
            let Some((s, a)) = allowed.split_once("://") else {
                return false;
            };
            let any_port = a.ends_with(":*");
            let (h, p) = split_authority(a.trim_end_matches(":*"));
            s == scheme && h == host && (any_port || p.is_none() || p == port)
        })
    }
}

/// 403 for a `Host` or `Origin` the server does not serve (DNS rebinding protection).
pub(crate) async fn host_and_origin(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if state.allowed.host_ok(&h) => {}
        Some(h) => {
            tracing::warn!(host = %h, "rejected request for a host this server does not serve");
            return json_error(
                Code::ForbiddenHost,
                "this Host is not served here; add it with --allowed-host if apigate runs behind a proxy",
            );
        }
        None => {
            return json_error(Code::ForbiddenHost, "the request has no Host header");
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .map(|o| state.allowed.origin_ok(o))
            .unwrap_or(false);
        if !ok {
            tracing::warn!("rejected request from a foreign Origin");
            return json_error(
                Code::ForbiddenOrigin,
                "requests from this Origin are not allowed; add it with --allowed-origin",
            );
        }
    }
    next.run(request).await
}

/// How tier-1 keys are checked.
pub enum KeyCheck {
    /// dev mode: one key, compared in constant time.
    Single(String),
    /// production: server keys in the database (and the bootstrap key).
    Database(Auth),
}

/// Bearer tokens (production with `--oauth-issuer`): who issues them, and which credentials
/// a request may present.
#[derive(Clone)]
pub struct OAuthGate {
    pub server: ResourceServer,
    pub mode: AuthMode,
}

/// The token of an `Authorization: Bearer …` header (scheme case-insensitive), trimmed.
/// `Err` for one over [`MAX_TOKEN_BYTES`] (the header is not read further).
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, OAuthError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    if value.len() > MAX_TOKEN_BYTES + 16 {
        return Err(OAuthError::TooLarge);
    }
    let Ok(value) = value.to_str() else {
        return Err(OAuthError::Malformed(
            "the Authorization header is not text".into(),
        ));
    };
    match value.trim().split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            Ok(Some(token.trim()).filter(|t| !t.is_empty()))
        }
        _ => Ok(None),
    }
}

/// A refusal of a request under OAuth: 401 (403 for a missing scope, 503 when the issuer's
/// keys cannot be had) with `WWW-Authenticate: Bearer resource_metadata="…"`, so an MCP
/// client finds where to sign in.
fn oauth_refusal(gate: &OAuthGate, error: Option<&OAuthError>) -> Response {
    let metadata = gate.server.metadata_url();
    let (status, challenge, message) = match error {
        None => (
            StatusCode::UNAUTHORIZED,
            format!("Bearer resource_metadata=\"{metadata}\""),
            match gate.mode {
                AuthMode::OAuth => "sign in: this server takes a bearer token from its identity \
                                    provider (Authorization: Bearer …)"
                    .to_string(),
                _ => "sign in with the identity provider (Authorization: Bearer …), or send a \
                      server key in x-api-key"
                    .to_string(),
            },
        ),
        Some(e @ OAuthError::InsufficientScope { scopes }) => (
            StatusCode::FORBIDDEN,
            insufficient_scope(gate, scopes, None),
            e.to_string(),
        ),
        // Why the issuer could not be asked names its JWKS or introspection URL: the log
        // has it (`bearer_caller`), the caller only learns whose tokens cannot be checked.
        Some(OAuthError::KeysUnavailable { issuer, .. }) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Bearer resource_metadata=\"{metadata}\""),
            format!(
                "the signing keys of {issuer} could not be fetched; try again shortly (the \
                 server's log says why)"
            ),
        ),
        Some(e @ OAuthError::TooManyAttempts) => {
            let mut response = json_error(Code::RateLimited, &e.to_string());
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return response;
        }
        Some(OAuthError::IntrospectionUnavailable { .. }) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Bearer resource_metadata=\"{metadata}\""),
            "the token could not be checked with its issuer; try again shortly (the server's \
             log says why)"
                .to_string(),
        ),
        Some(e) => (
            StatusCode::UNAUTHORIZED,
            format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\"",
                e.to_string().replace(['"', '\\'], "'")
            ),
            e.to_string(),
        ),
    };
    let code = if status == StatusCode::FORBIDDEN {
        Code::Forbidden
    } else {
        Code::Unauthorized
    };
    // A 503 (the issuer's keys or introspection unreachable) keeps the code UNAUTHORIZED:
    // the caller is not signed in yet, and retries.
    let mut error = ApiError::new(code, message);
    error.status = status;
    let mut response = error.into_response();
    if let Ok(value) = header::HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `WWW-Authenticate` for a token without the scopes a request needs (RFC 6750 §3.1): the
/// scopes to ask for, where to learn how (`resource_metadata`, as in a 401), and optionally
/// why, as one line of printable ASCII without quotes (at most 200 characters).
pub(super) fn insufficient_scope(
    gate: &OAuthGate,
    scopes: &[String],
    description: Option<&str>,
) -> String {
    let mut challenge = format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
        scopes.join(" "),
        gate.server.metadata_url()
    );
    if let Some(text) = description {
        let text: String = text
            .chars()
            .map(|c| match c {
                '"' | '\\' => '\'',
                c if c == ' ' || c.is_ascii_graphic() => c,
                _ => '?',
            })
            .take(200)
            .collect();
        challenge.push_str(&format!(", error_description=\"{text}\""));
    }
    challenge
}

/// The `x-api-key` a request presents, trimmed; `None` when absent or blank.
pub(super) fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// 401 unless the request carries a valid `x-api-key` (dev: the one key; production: an
/// active server key in the database, whose principal is attached for the tools).
pub async fn api_key(
    State(state): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(gate) = &state.oauth
        && gate.mode != AuthMode::Keys
    {
        let bearer = match bearer_token(request.headers()) {
            Ok(b) => b.map(str::to_string),
            Err(e) => return oauth_refusal(gate, Some(&e)),
        };
        let key = presented_key(request.headers()).map(str::to_string);
        match (bearer, key) {
            (Some(token), key) => {
                let peer = peer_ip(request.extensions());
                let caller = match bearer_caller(&state, gate, &token, key.as_deref(), peer).await {
                    Ok(c) => c,
                    Err(refused) => return refused,
                };
                request.extensions_mut().insert(caller);
                return next.run(request).await;
            }
            (None, None) => return oauth_refusal(gate, None),
            (None, Some(_)) if gate.mode == AuthMode::OAuth => {
                return oauth_refusal(gate, None);
            }
            // `both`: a key alone is checked as before.
            (None, Some(_)) => {}
        }
    }
    let Some(key) = presented_key(request.headers()).map(str::to_string) else {
        return json_error(
            Code::Unauthorized,
            "missing x-api-key header: send the server's API key in `x-api-key`",
        );
    };
    let verified = match &state.keys {
        KeyCheck::Single(expected) => {
            if !secrets_equal(expected, &key) {
                return json_error(Code::Unauthorized, "invalid API key in x-api-key");
            }
            None
        }
        KeyCheck::Database(auth) => match auth
            .authenticate_key_from(&key, peer_ip(request.extensions()))
            .await
        {
            Ok(k) => Some(k),
            Err(e) => return auth_error_response(e),
        },
    };
    request.extensions_mut().insert(HttpCaller {
        key_fingerprint: fingerprint(&key),
        key: verified,
        bearer: None,
    });
    next.run(request).await
}

/// The caller of a request with a bearer token: the token verified, and with `--auth both`
/// a key presented beside it verified too (the call then gets what both grant). Sessions and
/// the monitor know the caller by its issuer and subject, never by the token.
async fn bearer_caller(
    state: &AppState,
    gate: &OAuthGate,
    token: &str,
    key: Option<&str>,
    peer: Option<std::net::IpAddr>,
) -> Result<HttpCaller, Response> {
    let verified = gate.server.verify_from(token, peer).await.map_err(|e| {
        tracing::info!(error = %e, "bearer token refused");
        oauth_refusal(gate, Some(&e))
    })?;
    let key = match (key, &state.keys, gate.mode) {
        (Some(key), KeyCheck::Database(auth), AuthMode::Both) => Some(
            auth.authenticate_key_from(key, peer)
                .await
                .map_err(auth_error_response)?,
        ),
        _ => None,
    };
    let granted = verified.principal(key.as_ref());
    // A token that grants none of the tools is refused with 403.
    if !Tool::ALL
        .iter()
        .any(|t| granted.features.allows(t.feature()))
    {
        let scopes = gate.server.scopes_granting(Tool::Discover.feature());
        return Err(oauth_refusal(
            gate,
            Some(&OAuthError::InsufficientScope { scopes }),
        ));
    }
    // The person's own upstream credentials (stored under issuer and `sub`) come with them.
    let principal = match &state.keys {
        KeyCheck::Database(auth) => auth
            .signed_in(&verified, granted)
            .await
            .map_err(auth_error_response)?,
        KeyCheck::Single(_) => granted,
    };
    Ok(HttpCaller {
        key_fingerprint: fingerprint(&format!("oauth {} {}", verified.issuer, verified.subject)),
        key,
        bearer: Some(principal),
    })
}
