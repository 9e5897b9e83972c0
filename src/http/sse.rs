//! Legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer ships: `GET /sse` opens an
//! event stream that first announces `/message?sessionId=…`; `POST /message?sessionId=…`
//! carries client messages (answered 202; replies arrive on the stream). The session ends when
//! the stream is dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::guard::json_error;
use crate::mcp::{HttpCaller, McpServer};

type Sender = mpsc::UnboundedSender<ClientJsonRpcMessage>;

/// Open legacy SSE sessions: id → (fingerprint of the key that opened it, sender of client
/// messages).
#[derive(Default)]
pub struct SseSessions {
    inner: Mutex<HashMap<String, (String, Sender)>>,
}

impl SseSessions {
    /// The session's sender, if `key` is the key that opened it.
    fn sender(&self, id: &str, key: &str) -> Option<Sender> {
        let map = self.inner.lock().ok()?;
        let (owner, sender) = map.get(id)?;
        crate::auth::secrets_equal(owner, key).then(|| sender.clone())
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
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_server, from_client) = mpsc::unbounded::<ClientJsonRpcMessage>();
    let (to_client, from_server) = mpsc::unbounded();
    if let Ok(mut map) = state.sse.inner.lock() {
        map.insert(id.clone(), (owner, to_server));
    }
    let stop = CancellationToken::new();
    let handler = McpServer::new(state.engine.clone(), Some(format!("sse-{id}")), true);
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
pub struct MessageQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

pub async fn message(
    State(state): State<Arc<AppState>>,
    Query(q): Query<MessageQuery>,
    request: Request,
) -> Response {
    let Some(id) = q.session_id else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            "missing sessionId query parameter",
        );
    };
    // Only the key that opened the stream may post to it.
    let Some(sender) = state.sse.sender(&id, &key_of(request.extensions())) else {
        return json_error(
            StatusCode::NOT_FOUND,
            "SESSION_NOT_FOUND",
            "no open SSE session with this id; open GET /sse first",
        );
    };
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, state.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
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
    match &mut msg {
        JsonRpcMessage::Request(req) => {
            req.request.extensions_mut().insert(parts);
        }
        JsonRpcMessage::Notification(not) => {
            not.notification.extensions_mut().insert(parts);
        }
        _ => {}
    }
    if sender.unbounded_send(msg).is_err() {
        return json_error(
            StatusCode::GONE,
            "SESSION_CLOSED",
            "the SSE session has closed",
        );
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}
