//! In front of `/mcp`: request bodies that are not JSON-RPC get 400 with a JSON-RPC error (rmcp
//! answers 415); a Streamable HTTP session belongs to the key that opened it (any other key gets
//! the 404 of an unknown session); live sessions per key are capped (429 beyond the cap); and in
//! production `initialize` takes from the key's rate limit like a tool call. Stateless servers
//! answer plain `tools/list` here (`tool_list`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, ProtocolVersion};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;

use super::AppState;
use super::guard::KeyCheck;
use crate::mcp::HttpCaller;

const SESSION_HEADER: &str = "mcp-session-id";

/// Default of `--max-sessions-per-key`.
pub const DEFAULT_MAX_SESSIONS_PER_KEY: usize = 1000;

/// Who opened each live Streamable HTTP session.
pub struct McpSessions {
    /// `None` in stateless mode: there are no sessions to own.
    manager: Option<Arc<LocalSessionManager>>,
    max_per_key: usize,
    /// session id → fingerprint of the key that opened it.
    owners: Mutex<HashMap<String, String>>,
}

impl McpSessions {
    pub fn new(manager: Option<Arc<LocalSessionManager>>, max_per_key: usize) -> McpSessions {
        McpSessions {
            manager,
            max_per_key: max_per_key.max(1),
            owners: Mutex::default(),
        }
    }

    pub fn max_per_key(&self) -> usize {
        self.max_per_key
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn owner(&self, id: &str) -> Option<String> {
        self.owners().get(id).cloned()
    }

    /// Sessions `key` has open, after forgetting those rmcp has closed (idle timeout, DELETE).
    async fn live_for(&self, key: &str) -> usize {
        let Some(manager) = &self.manager else {
            return 0;
        };
        let live: std::collections::HashSet<String> = manager
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let mut owners = self.owners();
        owners.retain(|id, _| live.contains(id));
        owners.values().filter(|owner| *owner == key).count()
    }
}

/// The middleware; see the module docs.
pub async fn gate(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let key = request
        .extensions()
        .get::<HttpCaller>()
        .cloned()
        .unwrap_or_default();
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut message = None;
    let request = if request.method() == Method::POST && is_json(&request) {
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, state.max_body_bytes).await {
            Ok(b) => b,
            Err(_) => {
                return super::guard::json_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "PAYLOAD_TOO_LARGE",
                    &format!(
                        "request body is over the {}-byte limit",
                        state.max_body_bytes
                    ),
                );
            }
        };
        match parse(&bytes) {
            Ok(m) => message = Some(m),
            Err(response) => return *response,
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        request
    };
    let uses_session = uses_session(message.as_ref(), request.headers());
    if let (Some(id), true) = (&session, uses_session) {
        // Another key's session, or one we never saw: the same answer as rmcp's for an unknown
        // id, so a guessed id tells nothing.
        let owned = state.sessions.owner(id);
        if state.sessions.manager.is_some()
            && !owned.is_some_and(|o| crate::auth::secrets_equal(&o, &key.key_fingerprint))
        {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    if message.as_ref().is_some_and(is_initialize)
        && let Some(refused) = admit_initialize(&state, &key, session.is_some()).await
    {
        return refused;
    }
    if let (Some(lists), Some(message)) = (&state.tool_list, &message)
        && let Some(answer) = super::tool_list::answer(lists, message, request.headers())
    {
        return answer;
    }
    let deleting = request.method() == Method::DELETE;
    let response = next.run(request).await;
    if let Some(id) = &session {
        if deleting && response.status().is_success() {
            state.sessions.owners().remove(id);
        }
    } else if state.sessions.manager.is_some()
        && let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        state
            .sessions
            .owners()
            .insert(id.to_string(), key.key_fingerprint.clone());
    }
    response
}

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// A JSON-RPC message, or the 400 that says why the body is not one.
fn parse(bytes: &Bytes) -> Result<ClientJsonRpcMessage, Box<Response>> {
    // One pass for a valid message; the second only to say what is wrong with the others.
    if let Ok(message) = serde_json::from_slice(bytes) {
        return Ok(message);
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            -32700,
            &format!("Parse error: the body is not JSON ({e})"),
        ))
    })?;
    serde_json::from_value(value).map_err(|e| {
        Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            &format!("Invalid Request: the body is JSON but not a JSON-RPC 2.0 message ({e})"),
        ))
    })
}

/// Whether rmcp serves this request within an `Mcp-Session-Id` session, as its Streamable HTTP
/// service decides: `initialize` and protocol versions with a handshake do; a request carrying
/// the 2026-07-28 `_meta` (or naming such a version) is served without one, whatever session
/// header it sends.
fn uses_session(message: Option<&ClientJsonRpcMessage>, headers: &axum::http::HeaderMap) -> bool {
    let request = match message {
        Some(JsonRpcMessage::Request(r)) => Some(&r.request),
        _ => None,
    };
    if request.is_some_and(|r| matches!(r, ClientRequest::InitializeRequest(_))) {
        return true;
    }
    let meta = request.map(GetMeta::get_meta);
    if meta.is_some_and(|m| {
        m.missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
    }) {
        return false;
    }
    let version = meta.and_then(|m| m.protocol_version()).or_else(|| {
        headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| serde_json::from_value(serde_json::Value::String(s.into())).ok())
    });
    version.is_none_or(|v: ProtocolVersion| v.has_initialize())
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_)))
}

/// `None` when a new session may start; else the refusal.
async fn admit_initialize(
    state: &AppState,
    key: &HttpCaller,
    has_session: bool,
) -> Option<Response> {
    if let (KeyCheck::Database(auth), Some(principal)) = (&state.keys, &key.key)
        && let Err(e) = auth.check_rate(&principal.principal())
    {
        return Some(super::admin::auth_error_response(e));
    }
    if has_session || state.sessions.manager.is_none() {
        return None;
    }
    let open = state.sessions.live_for(&key.key_fingerprint).await;
    if open < state.sessions.max_per_key {
        return None;
    }
    tracing::warn!(
        key = %key.key_fingerprint,
        open,
        "refused a new MCP session: this key has --max-sessions-per-key open"
    );
    Some(rpc_error(
        StatusCode::TOO_MANY_REQUESTS,
        -32000,
        &format!(
            "this API key already has {open} open MCP sessions (--max-sessions-per-key {}): \
             end unused ones with DELETE /mcp and their Mcp-Session-Id, or wait for idle ones \
             to expire (5 minutes)",
            state.sessions.max_per_key
        ),
    ))
}

fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": code, "message": message}})),
    )
        .into_response()
}
