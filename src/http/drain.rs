//! Shutdown and readiness. On SIGTERM (the shutdown token) a server stops accepting
//! connections (`conn.rs`) and says so on `/ready`; the requests it accepted run to their
//! end, bounded by `--drain-timeout`: only then are the MCP sessions and their streams (SSE,
//! `subscriptions/listen`) ended, which a client reconnects from (to another replica behind a
//! load balancer). Requests in flight are counted here, from their arrival until their
//! response's last byte; streams that never end on their own (a `GET` stream, a listen
//! stream, marked [`LongLived`]) are not waited for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::AppState;

/// A response extension: the response is a stream that does not end on its own, so the
/// drain does not wait for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LongLived;

/// How draining goes: whether it started, what is in flight, and the token that ends the
/// sessions once it is done.
#[derive(Debug, Default)]
pub(crate) struct Drain {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    /// Cancelled when the drain is over: ends MCP sessions and their streams.
    sessions: CancellationToken,
}

/// One request in flight, counted until dropped (its response sent, or the client gone).
pub(crate) struct OpenRequest(Arc<Drain>);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drain {
    /// The token that ends the MCP sessions once the drain is over.
    pub(crate) fn sessions(&self) -> CancellationToken {
        self.sessions.clone()
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    fn enter(self: &Arc<Self>) -> OpenRequest {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        OpenRequest(self.clone())
    }

    /// Waits for `shutdown`, then for the requests in flight to end (at most `timeout`),
    /// then ends the sessions.
    pub(crate) async fn run(self: Arc<Self>, shutdown: CancellationToken, timeout: Duration) {
        shutdown.cancelled().await;
        self.draining.store(true, Ordering::Release);
        let at_start = self.in_flight.load(Ordering::Acquire);
        tracing::info!(
            in_flight = at_start,
            timeout_secs = timeout.as_secs(),
            "draining: no new connections; requests in flight may finish"
        );
        let finished = tokio::time::timeout(timeout, async {
            while self.in_flight.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if finished.is_err() {
            tracing::warn!(
                in_flight = self.in_flight.load(Ordering::Acquire),
                timeout_secs = timeout.as_secs(),
                "requests still in flight after --drain-timeout; ending them"
            );
        }
        self.sessions.cancel();
    }
}

/// The middleware that counts requests in flight; `GET`s (streams, `/health`) are not.
pub(crate) async fn track(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET {
        return next.run(request).await;
    }
    let counted = state.drain.enter();
    let response = next.run(request).await;
    if response.extensions().get::<LongLived>().is_some() {
        return response;
    }
    held_until_sent(response, counted)
}

/// `GET /ready`: 200 while this replica should get requests; 503 while it drains or its
/// database does not answer (a load balancer or Kubernetes sends its traffic elsewhere).
/// `/health` says whether the process lives.
pub(crate) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    if state.drain.is_draining() {
        return not_ready("draining: shutting down, requests in flight finish");
    }
    if let Some(auth) = &state.database {
        match tokio::time::timeout(Duration::from_secs(2), auth.ping()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return not_ready("the database does not answer"),
        }
    }
    Json(json!({"ready": true})).into_response()
}

fn not_ready(reason: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"ready": false, "reason": reason})),
    )
        .into_response()
}

/// `response`, keeping `guard` until its body has been sent (or dropped).
pub(super) fn held_until_sent<G: Send + Sync + 'static>(response: Response, guard: G) -> Response {
    let (parts, body) = response.into_parts();
    let stream = futures::stream::unfold(
        (body.into_data_stream(), guard),
        |(mut body, guard)| async move { body.next().await.map(|chunk| (chunk, (body, guard))) },
    );
    Response::from_parts(parts, Body::from_stream(stream))
}
