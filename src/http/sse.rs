//! Legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer ships: `GET /sse` opens an
//! event stream that first announces `/message?sessionId=…`; `POST /message?sessionId=…`
//! carries client messages (answered 202; replies arrive on the stream). The session ends when
//! the stream is dropped. A stream belongs to the key that opened it and acts for the
//! `x-session-token` it was opened with (production): every message on it is pinned to both.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::error::json_error;
use crate::auth::SESSION_TOKEN_HEADER;
use crate::mcp::{HttpCaller, McpServer};
use crate::types::Code;

/// Default of `--sse-queue`: requests a legacy SSE session may have unanswered on its stream
/// (running, or answered but not yet taken by the client) before more are refused (429).
pub(crate) const DEFAULT_QUEUE: usize = 64;

/// One open legacy SSE session.
#[derive(Clone)]
struct Entry {
    /// Fingerprint of the key that opened it.
    owner: String,
    to_server: mpsc::UnboundedSender<ClientJsonRpcMessage>,
    /// Requests posted whose replies the event stream has not yet sent. rmcp's service reads
    /// every message at once and queues its replies, so the bound is kept here.
    pending: Arc<AtomicUsize>,
    /// The `x-session-token` the stream was opened with: every message posted to it acts for
    /// that session, whatever it carries itself.
    session_token: Option<HeaderValue>,
}

/// Open legacy SSE sessions by id.
#[derive(Default)]
pub(crate) struct SseSessions {
    inner: Mutex<HashMap<String, Entry>>,
}

impl SseSessions {
    /// The session, if `key` is the key that opened it.
    fn get(&self, id: &str, key: &str) -> Option<Entry> {
        let map = self.inner.lock().ok()?;
        let entry = map.get(id)?;
        crate::secrets_equal(&entry.owner, key).then(|| entry.clone())
    }

    /// Streams `key` has open.
    fn open_for(&self, key: &str) -> usize {
        self.inner
            .lock()
            .map(|map| map.values().filter(|e| e.owner == key).count())
            .unwrap_or(0)
    }
}

fn key_of(extensions: &axum::http::Extensions) -> String {
    extensions
        .get::<HttpCaller>()
        .map(|c| c.key_fingerprint.clone())
        .unwrap_or_default()
}

/// Removes the session and stops its service when the event stream is dropped.
struct StreamGuard {
    id: String,
    state: Arc<AppState>,
    stop: CancellationToken,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Ok(mut map) = self.state.sse.inner.lock() {
            map.remove(&self.id);
        }
    }
}

pub async fn open(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let owner = key_of(request.extensions());
    let session_token = request.headers().get(SESSION_TOKEN_HEADER).cloned();
    // The same cap as Streamable HTTP sessions, counted apart.
    let open = state.sse.open_for(&owner);
    if open >= state.sessions.max_per_key() {
        return json_error(
            Code::TooManySessions,
            &format!(
                "this API key already has {open} open SSE sessions (--max-sessions-per-key): \
                 close unused event streams first"
            ),
        );
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_server, from_client) = mpsc::unbounded::<ClientJsonRpcMessage>();
    let (to_client, from_server) = mpsc::unbounded();
    let pending = Arc::new(AtomicUsize::new(0));
    if let Ok(mut map) = state.sse.inner.lock() {
        let entry = Entry {
            owner,
            to_server,
            pending: pending.clone(),
            session_token,
        };
        map.insert(id.clone(), entry);
    }
    let stop = CancellationToken::new();
    let handler = McpServer::with_tools(
        state.engine.clone(),
        Some(format!("sse-{id}")),
        true,
        &state.tool_list,
    );
    let service_stop = stop.clone();
    tokio::spawn(async move {
        match rmcp::service::serve_server_with_ct(handler, (to_client, from_client), service_stop)
            .await
        {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(e) => tracing::info!(error = %e, "legacy SSE session ended before initialization"),
        }
    });
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/message?sessionId={id}"));
    let guard = StreamGuard { id, state, stop };
    let messages = from_server.map(move |msg: rmcp::model::ServerJsonRpcMessage| {
        let _keep = &guard;
        if matches!(msg, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)) {
            // An answer leaves: one request fewer unanswered.
            let _ = pending.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
        let data = serde_json::to_string(&msg).unwrap_or_default();
        Ok::<Event, Infallible>(Event::default().event("message").data(data))
    });
    let stream = futures::stream::once(async move { Ok(endpoint) }).chain(messages);
    Sse::new(boxed(stream))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

fn boxed(
    s: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> {
    Box::pin(s)
}

#[derive(Deserialize)]
pub(crate) struct MessageQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

pub async fn message(
    State(state): State<Arc<AppState>>,
    Query(q): Query<MessageQuery>,
    request: Request,
) -> Response {
    let Some(id) = q.session_id else {
        return json_error(Code::BadRequest, "missing sessionId query parameter");
    };
    // Only the key that opened the stream may post to it.
    let Some(session) = state.sse.get(&id, &key_of(request.extensions())) else {
        return json_error(
            Code::SessionNotFound,
            "no open SSE session with this id; open GET /sse first",
        );
    };
    let (mut parts, body) = request.into_parts();
    // The stream's session token is pinned: a message naming another session (in its header
    // here, or as `_sessionToken`, which then differs from the pinned header) is refused.
    let posted = parts.headers.get(SESSION_TOKEN_HEADER);
    let same = match (posted, &session.session_token) {
        (None, _) => true,
        (Some(p), Some(pinned)) => crate::secrets_equal(
            &String::from_utf8_lossy(p.as_bytes()),
            &String::from_utf8_lossy(pinned.as_bytes()),
        ),
        (Some(_), None) => false,
    };
    if !same {
        return json_error(
            Code::SessionTokenMismatch,
            "this message's x-session-token differs from the one its SSE stream was opened \
             with; a stream acts for one user session: open another stream for another session",
        );
    }
    parts.headers.remove(SESSION_TOKEN_HEADER);
    if let Some(pinned) = &session.session_token {
        parts.headers.insert(SESSION_TOKEN_HEADER, pinned.clone());
    }
    let bytes: Bytes = match axum::body::to_bytes(body, state.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return json_error(
                Code::PayloadTooLarge,
                "request body is over the server's limit",
            );
        }
    };
    let mut msg: ClientJsonRpcMessage = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("Parse error: {e}")}})),
            )
                .into_response();
        }
    };
    // A person's tool call their token's scopes do not allow: 403, as on `/mcp`.
    if let Some(caller) = parts.extensions.get::<HttpCaller>()
        && let Some(refused) = super::step_up::refusal(&state, caller, &msg).await
    {
        return refused;
    }
    match &mut msg {
        JsonRpcMessage::Request(req) => {
            req.request.extensions_mut().insert(parts);
        }
        JsonRpcMessage::Notification(not) => {
            not.notification.extensions_mut().insert(parts);
        }
        _ => {}
    }
    let is_request = matches!(msg, JsonRpcMessage::Request(_));
    if is_request {
        let taken = session
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < state.sse_queue).then_some(n + 1)
            });
        if taken.is_err() {
            return json_error(
                Code::SseQueueFull,
                &format!(
                    "this SSE session has {} requests whose replies its event stream has not \
                     delivered (--sse-queue): read the stream before sending more",
                    state.sse_queue
                ),
            );
        }
    }
    if session.to_server.unbounded_send(msg).is_err() {
        return json_error(Code::SessionClosed, "the SSE session has closed");
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}
