//! In front of `/mcp`: request bodies that are not JSON-RPC get 400 with a JSON-RPC error (rmcp
//! answers 415); a Streamable HTTP session belongs to the key that opened it (any other key gets
//! the 404 of an unknown session); live sessions per key are capped (429 beyond the cap); and in
//! production `initialize` takes from the key's rate limit like a tool call. A plain
//! `tools/list` (stateless, or in a live session of the caller's key) is answered here
//! (`tool_list`), and so is a plain `tools/call` of `api_discover` or `api_schema` when no
//! monitor is configured (`tool_call`). Before either, a signed-in person's `tools/call` that
//! their token's scopes do not allow gets `403 insufficient_scope` (`step_up`). Sessions idle
//! for 5 minutes are closed here too: the gate sees every request, rmcp only those it serves.
//!
//! A `subscriptions/listen` stream (protocol 2026-07-28) holds a connection as a session
//! does: it counts under the key's `--max-sessions-per-key` with its sessions, one key holds
//! at most half of `--max-connections` in them (the rest stay for other keys and `/health`),
//! and a stream that carried nothing but keep-alives for the session idle time (5 minutes)
//! is ended; the client listens again.
//!
//! In production the count of sessions and streams per key is shared by every replica on the
//! database: each holds a lease (`auth/leases.rs`) for as long as it lives here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, ProtocolVersion};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::guard::KeyCheck;
use crate::auth::{Lease, Leases, NoLease};
use crate::mcp::HttpCaller;

const SESSION_HEADER: &str = "mcp-session-id";

/// Default of `--max-sessions-per-key`.
pub(crate) const DEFAULT_MAX_SESSIONS_PER_KEY: usize = 1000;

/// How long a Streamable HTTP session may go without a request before it is closed (rmcp's
/// own default, which apigate now applies itself: see [`McpSessions::expire_idle`]).
pub(crate) const SESSION_IDLE: Duration = Duration::from_secs(300);

/// Who opened each live Streamable HTTP session, and when it was last used.
pub(crate) struct McpSessions {
    /// `None` in stateless mode: there are no sessions to own.
    pub(super) manager: Option<Arc<LocalSessionManager>>,
    max_per_key: usize,
    idle: Duration,
    /// session id → the key that opened it and its last request.
    owners: Mutex<HashMap<String, Owned>>,
    /// The most `subscriptions/listen` streams one key may hold: half of `--max-connections`
    /// (at least 1), within `max_per_key`.
    max_listens_per_key: usize,
    /// key fingerprint → its open `subscriptions/listen` streams.
    listens: Arc<Mutex<HashMap<String, usize>>>,
    /// The count every replica shares (production); `None`: this replica counts alone.
    leases: Option<Arc<Leases>>,
}

/// One open `subscriptions/listen` stream of a key, counted until dropped (the stream ended,
/// the client went away, or it idled out).
struct ListenSlot {
    listens: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
    /// Its place in the key's count on every replica, ended with the slot.
    _lease: Option<Lease>,
}

impl Drop for ListenSlot {
    fn drop(&mut self) {
        let mut listens = lock(&self.listens);
        if let Some(n) = listens.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                listens.remove(&self.key);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A new session's or stream's place in its key's count.
struct Place {
    lease: Option<Lease>,
    /// Whether the lease was counted with every replica's (else this replica counts alone).
    counted: bool,
}

struct Owned {
    /// Fingerprint of the key that opened the session.
    key: String,
    last_seen: Instant,
    /// Its place in the key's count on every replica, ended when the session is forgotten.
    _lease: Option<Lease>,
}

/// A session manager whose sessions never time out by themselves: the gate sees every request
/// of a session, including the `tools/list` it answers without rmcp, so apigate keeps the
/// idle clock ([`McpSessions::expire_idle`]); rmcp's would only see the requests it serves.
pub(crate) fn session_manager() -> LocalSessionManager {
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    manager
}

impl McpSessions {
    pub fn new(
        manager: Option<Arc<LocalSessionManager>>,
        max_per_key: usize,
        idle: Duration,
        max_connections: usize,
        leases: Option<Arc<Leases>>,
    ) -> McpSessions {
        let max_per_key = max_per_key.max(1);
        McpSessions {
            manager,
            max_per_key,
            idle,
            owners: Mutex::default(),
            max_listens_per_key: (max_connections / 2).clamp(1, max_per_key),
            listens: Arc::default(),
            leases,
        }
    }

    /// A place for one more session or stream of `key` in the count every replica shares,
    /// or the answer that refuses it. `counted: false` when this replica counts alone (no
    /// database, or it does not answer and `--limits-unavailable open`).
    async fn lease(&self, key: &str) -> Result<Place, Response> {
        let Some(leases) = &self.leases else {
            return Ok(Place {
                lease: None,
                counted: false,
            });
        };
        match leases.take(key, self.max_per_key).await {
            Ok(lease) => Ok(Place {
                lease: Some(lease),
                counted: true,
            }),
            Err(NoLease::Local(lease)) => Ok(Place {
                lease: Some(lease),
                counted: false,
            }),
            Err(NoLease::Unavailable) => Err(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                "the MCP session count the replicas share cannot be checked: Postgres did not \
                 answer; try again later (--limits-unavailable closed)",
            )),
            Err(NoLease::Full(held)) => {
                tracing::warn!(key = %key, held, "refused a new MCP session or stream: this key holds --max-sessions-per-key on all replicas");
                Err(rpc_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    -32000,
                    &format!(
                        "this API key already holds {held} MCP sessions and subscriptions/listen \
                         streams on all replicas (--max-sessions-per-key {}): end unused \
                         sessions with DELETE /mcp and their Mcp-Session-Id or close a stream, \
                         or wait for idle ones to expire (5 minutes)",
                        self.max_per_key
                    ),
                ))
            }
        }
    }

    /// The `subscriptions/listen` streams `key` holds.
    fn listens_for(&self, key: &str) -> usize {
        lock(&self.listens).get(key).copied().unwrap_or(0)
    }

    /// A slot for one more listen stream of `key`, or the 429 that refuses it: its sessions
    /// and streams together are at `--max-sessions-per-key`, or its streams at half of
    /// `--max-connections`.
    async fn admit_listen(&self, key: &str) -> Result<ListenSlot, Response> {
        let place = self.lease(key).await?;
        let sessions = self.live_for(key).await;
        let mut listens = lock(&self.listens);
        let streams = listens.get(key).copied().unwrap_or(0);
        let message = if !place.counted && sessions + streams >= self.max_per_key {
            format!(
                "this API key already holds {sessions} MCP sessions and {streams} \
                 subscriptions/listen streams (--max-sessions-per-key {}): close a stream or \
                 a session (DELETE /mcp) first",
                self.max_per_key
            )
        } else if streams >= self.max_listens_per_key {
            format!(
                "this API key already holds {streams} subscriptions/listen streams, its share \
                 of --max-connections (--max-sessions-per-key {}): close one first",
                self.max_per_key
            )
        } else {
            *listens.entry(key.to_string()).or_default() += 1;
            return Ok(ListenSlot {
                listens: self.listens.clone(),
                key: key.to_string(),
                _lease: place.lease,
            });
        };
        drop(listens);
        tracing::warn!(key = %key, sessions, streams, "refused a subscriptions/listen stream: the key holds its share");
        Err(rpc_error(StatusCode::TOO_MANY_REQUESTS, -32000, &message))
    }

    /// Closes every session idle for longer than the limit, then again every quarter of it
    /// (at most every 30 s), until `shutdown`.
    pub(crate) async fn expire_idle(self: Arc<Self>, shutdown: CancellationToken) {
        let Some(manager) = self.manager.clone() else {
            return;
        };
        let period = (self.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let idle: Vec<String> = {
                let mut owners = self.owners();
                let ids: Vec<String> = owners
                    .iter()
                    .filter(|(_, o)| o.last_seen.elapsed() > self.idle)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in &ids {
                    owners.remove(id);
                }
                ids
            };
            for id in idle {
                tracing::debug!(
                    idle_secs = self.idle.as_secs(),
                    "closing an idle MCP session"
                );
                if let Err(e) = manager.close_session(&id.into()).await {
                    tracing::warn!(error = %e, "could not close an idle MCP session");
                }
            }
        }
    }

    /// Notes a request of session `id` (known and owned).
    fn seen(&self, id: &str) {
        if let Some(o) = self.owners().get_mut(id) {
            o.last_seen = Instant::now();
        }
    }

    pub(crate) fn max_per_key(&self) -> usize {
        self.max_per_key
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owned>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn owner(&self, id: &str) -> Option<String> {
        self.owners().get(id).map(|o| o.key.clone())
    }

    /// Sessions `key` has open, after forgetting those rmcp has closed (DELETE, shutdown).
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
        owners.values().filter(|owner| owner.key == key).count()
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
                return super::error::too_large(state.max_body_bytes);
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
    let mut live_session = false;
    if let (Some(id), true) = (&session, uses_session) {
        // Another key's session, or one we never saw: the same answer as rmcp's for an unknown
        // id, so a guessed id tells nothing.
        let owned = state.sessions.owner(id);
        if state.sessions.manager.is_some()
            && !owned.is_some_and(|o| crate::secrets_equal(&o, &key.key_fingerprint))
        {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
        if let Some(manager) = &state.sessions.manager {
            state.sessions.seen(id);
            live_session = manager
                .has_session(&id.clone().into())
                .await
                .unwrap_or(false);
        }
    }
    let session_token = request
        .headers()
        .get(crate::auth::SESSION_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let mut lease = None;
    if message.as_ref().is_some_and(is_initialize) {
        match admit_initialize(&state, &key, session.is_some(), session_token.as_deref()).await {
            Ok(taken) => lease = taken,
            Err(refused) => return refused,
        }
    }
    if message.as_ref().is_some_and(is_read_resource) {
        // The answer's bytes in flight stay held until its body has been sent.
        let hold = crate::mcp::ReadHold::default();
        let mut request = request;
        request.extensions_mut().insert(hold.clone());
        let response = next.run(request).await;
        return super::drain::held_until_sent(response, hold);
    }
    if message.as_ref().is_some_and(is_listen) {
        let slot = match state.sessions.admit_listen(&key.key_fingerprint).await {
            Ok(slot) => slot,
            Err(refused) => return refused,
        };
        let mut response = next.run(request).await;
        response.extensions_mut().insert(super::drain::LongLived);
        return held_while_open(response, slot, state.sessions.idle);
    }
    // Stateless, or a live session of this key: a plain `tools/list`, and a plain
    // `tools/call` that cannot wait, are answered here.
    let listable = state.sessions.manager.is_none() || live_session;
    // A call that reaches the tools, by a person whose token lacks scopes it needs: 403.
    if let (true, Some(message)) = (listable || !uses_session, &message)
        && let Some(refused) = super::step_up::refusal(&state, &key, message).await
    {
        return refused;
    }
    if let (true, Some(message)) = (listable, &message)
        && let Some(answer) = super::tool_list::answer(
            &state.tool_list,
            &state.engine,
            key.bearer.is_some(),
            message,
            request.headers(),
        )
    {
        return answer;
    }
    if let (true, Some(message)) = (listable, &message)
        && let Some(answer) = super::tool_call::answer(
            &state.engine,
            message,
            request.headers(),
            &key,
            session.as_deref().filter(|_| live_session),
        )
        .await
    {
        if live_session && let Some(id) = &session {
            state.sessions.seen(id);
        }
        return answer;
    }
    let deleting = request.method() == Method::DELETE;
    let response = next.run(request).await;
    if let Some(id) = &session {
        if deleting && response.status().is_success() {
            state.sessions.owners().remove(id);
        } else if live_session {
            // A long call counts as use until it answers.
            state.sessions.seen(id);
        }
    } else if state.sessions.manager.is_some()
        && let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        state.sessions.owners().insert(
            id.to_string(),
            Owned {
                key: key.key_fingerprint.clone(),
                last_seen: Instant::now(),
                _lease: lease,
            },
        );
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

fn is_listen(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::SubscriptionsListenRequest(_)))
}

/// The listen stream's response, holding `slot` until its body ends and ended once it has
/// sent nothing but SSE comments (keep-alives) for `idle`.
fn held_while_open(response: Response, slot: ListenSlot, idle: Duration) -> Response {
    let (parts, body) = response.into_parts();
    let state = (
        body.into_data_stream(),
        slot,
        tokio::time::Instant::now() + idle,
    );
    let stream = futures::stream::unfold(state, move |(mut body, slot, deadline)| async move {
        match tokio::time::timeout_at(deadline, body.next()).await {
            Ok(Some(Ok(chunk))) => {
                let deadline = if chunk.starts_with(b":") {
                    deadline
                } else {
                    tokio::time::Instant::now() + idle
                };
                Some((Ok(chunk), (body, slot, deadline)))
            }
            Ok(Some(Err(e))) => Some((Err(e), (body, slot, deadline))),
            Ok(None) => None,
            Err(_) => {
                tracing::debug!(
                    idle_secs = idle.as_secs(),
                    "ending an idle subscriptions/listen stream"
                );
                None
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

fn is_read_resource(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::ReadResourceRequest(_)))
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_)))
}

/// `Ok` when a new session may start, with its place in the key's count on every replica
/// (production); else the refusal.
async fn admit_initialize(
    state: &AppState,
    key: &HttpCaller,
    has_session: bool,
    session_token: Option<&str>,
) -> Result<Option<Lease>, Response> {
    // A signed-in person's new session, or one opened with a user session's
    // `x-session-token`, spends that person's or session's own bucket with the key's, at
    // once: one person opening sessions cannot drain a key others share.
    if let KeyCheck::Database(auth) = &state.keys {
        let who = match (&key.bearer, &key.key, session_token) {
            (Some(person), Some(_), _) => Some(person.clone()),
            (None, Some(k), Some(token)) => match auth.authenticate_session(k, token).await {
                Ok(session) => Some(session),
                // A wrong token is refused at its first tool call; here it spends the key's.
                Err(_) => Some(k.principal()),
            },
            (_, Some(k), None) => Some(k.principal()),
            (_, None, _) => None,
        };
        if let Some(principal) = who
            && let Err(e) = auth.check_rate(&principal).await
        {
            return Err(super::error::auth_error_response(e));
        }
    }
    if has_session || state.sessions.manager.is_none() {
        return Ok(None);
    }
    let place = state.sessions.lease(&key.key_fingerprint).await?;
    if place.counted {
        return Ok(place.lease);
    }
    let open = state.sessions.live_for(&key.key_fingerprint).await
        + state.sessions.listens_for(&key.key_fingerprint);
    if open < state.sessions.max_per_key {
        return Ok(place.lease);
    }
    tracing::warn!(
        key = %key.key_fingerprint,
        open,
        "refused a new MCP session: this key has --max-sessions-per-key open"
    );
    Err(rpc_error(
        StatusCode::TOO_MANY_REQUESTS,
        -32000,
        &format!(
            "this API key already has {open} open MCP sessions and subscriptions/listen \
             streams (--max-sessions-per-key {}): end unused sessions with DELETE /mcp and \
             their Mcp-Session-Id or close a stream, or wait for idle ones to expire (5 minutes)",
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
