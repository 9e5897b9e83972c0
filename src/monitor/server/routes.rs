//! The reference monitor's HTTP surface: the protocol endpoint (`POST /agent-monitor`), the
//! page, the JSON API and its event stream, and the middleware in front of them (loopback
//! `Host` and same-`Origin` checks for everything, the per-run secret for the page and
//! `/api/*`). Handlers parse requests and shape answers; the state lives in `state.rs`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::access::{self, LINK_PARAM, RunSecret};
use super::state::{ApprovalView, DecisionRecord, SessionView, Shared, StateView, StoredEvent};
use crate::monitor::protocol::ReceivedEvent;

const PAGE: &str = include_str!("../page.html");
/// Protocol events are small (arguments are cut to 100 characters); this bounds the ring.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// What every handler gets.
#[derive(Clone)]
pub(super) struct App {
    pub(super) shared: Arc<Shared>,
    pub(super) access: RunSecret,
    /// A loopback-bound monitor answers only loopback `Host` names.
    pub(super) loopback_only: bool,
}

pub(super) fn router(app: App) -> Router {
    let api = Router::new()
        .route("/api/state", get(api_state))
        .route("/api/events", get(api_events))
        .route("/api/sessions", get(api_sessions))
        .route("/api/approvals", get(api_approvals))
        .route("/api/decisions", get(api_decisions))
        .route("/api/rules", get(api_rules))
        .route("/api/stream", get(api_stream))
        .route("/api/approvals/{id}/approve", post(approve))
        .route("/api/approvals/{id}/deny", post(deny))
        .route("/api/{*rest}", get(|| async { not_found() }))
        .layer(middleware::from_fn_with_state(app.clone(), require_secret));
    Router::new()
        .route("/", get(page))
        .route(
            "/agent-monitor",
            post(agent_monitor).fallback(|| async { not_found() }),
        )
        .route(
            "/health",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .merge(api)
        .fallback(|| async { not_found() })
        .layer(middleware::from_fn_with_state(app.clone(), guard_origin))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found").into_response()
}

fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"error": message.into()}))).into_response()
}

/// Browser protections for a localhost service: a loopback-bound monitor only answers
/// loopback `Host` names (DNS rebinding), and a request carrying an `Origin` must come from
/// the page itself (no other site can approve calls or post events).
async fn guard_origin(State(app): State<App>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if app.loopback_only && !is_loopback_authority(&host) {
        return json_error(
            StatusCode::FORBIDDEN,
            "this monitor only answers on localhost",
        );
    }
    if req.method() != Method::GET
        && let Some(origin) = req.headers().get(header::ORIGIN)
    {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| url::Url::parse(o).ok())
            .is_some_and(|o| {
                let authority = match o.port() {
                    Some(p) => format!("{}:{p}", o.host_str().unwrap_or_default()),
                    None => o.host_str().unwrap_or_default().to_owned(),
                };
                authority.eq_ignore_ascii_case(&host)
            });
        if !same {
            return json_error(StatusCode::FORBIDDEN, "cross-origin requests are refused");
        }
    }
    next.run(req).await
}

/// `/api/*` only for whoever holds this run's secret (the page's cookie, or a bearer token):
/// no other local process can read the approvals or decide them.
async fn require_secret(State(app): State<App>, req: Request, next: Next) -> Response {
    if !app.access.allows(req.headers()) {
        return access::api_unauthorized();
    }
    next.run(req).await
}

fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `GET /`: the page, for whoever holds the secret. `/?token=SECRET` (the printed link) sets
/// the cookie and redirects to `/`, so the secret does not stay in the address bar or history.
async fn page(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(candidate) = query.get(LINK_PARAM) {
        if !app.access.is_secret(candidate) {
            return access::page_unauthorized(true);
        }
        let mut response = Redirect::to("/").into_response();
        if let Ok(cookie) = app.access.cookie().parse() {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        no_store(response.headers_mut());
        return response;
    }
    if !app.access.allows(&headers) {
        return access::page_unauthorized(false);
    }
    let mut response = Html(PAGE).into_response();
    no_store(response.headers_mut());
    response
}

fn no_store(headers: &mut HeaderMap) {
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
}

/// `POST /agent-monitor`: the protocol endpoint.
async fn agent_monitor(State(app): State<App>, body: Bytes) -> Response {
    let received = match ReceivedEvent::parse(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("Bad Request: {e}")).into_response(),
    };
    match app.shared.receive(received).await {
        Some(decision) => (StatusCode::OK, axum::Json(decision)).into_response(),
        None => (StatusCode::OK, "OK").into_response(),
    }
}

async fn api_state(State(app): State<App>) -> axum::Json<StateView> {
    axum::Json(app.shared.snapshot())
}

async fn api_events(State(app): State<App>) -> axum::Json<Vec<StoredEvent>> {
    axum::Json(app.shared.events())
}

async fn api_sessions(State(app): State<App>) -> axum::Json<Vec<SessionView>> {
    axum::Json(app.shared.sessions())
}

async fn api_approvals(State(app): State<App>) -> axum::Json<Vec<ApprovalView>> {
    axum::Json(app.shared.approvals())
}

async fn api_decisions(State(app): State<App>) -> axum::Json<Vec<DecisionRecord>> {
    axum::Json(app.shared.decisions())
}

async fn api_rules(State(app): State<App>) -> axum::Json<Value> {
    axum::Json(app.shared.rules_view())
}

async fn approve(State(app): State<App>, UrlPath(id): UrlPath<String>) -> Response {
    decided(&id, app.shared.decide(&id, true, None))
}

async fn deny(
    State(app): State<App>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reason = if body.is_empty() {
        None
    } else {
        let is_json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) if is_json => v
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| r.chars().take(500).collect()),
            _ => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    "expected an empty body or JSON {\"reason\": \"...\"}",
                );
            }
        }
    };
    decided(&id, app.shared.decide(&id, false, reason))
}

fn decided(id: &str, view: Option<ApprovalView>) -> Response {
    match view {
        Some(view) => (StatusCode::OK, axum::Json(view)).into_response(),
        None => json_error(
            StatusCode::NOT_FOUND,
            format!("no pending approval {id:?} (already decided, timed out, or unknown)"),
        ),
    }
}

/// `GET /api/stream`: Server-Sent Events `event`, `session`, `approval`, `decision`; a
/// `resync` event when the client fell behind (the page then reloads `/api/state`).
async fn api_stream(State(app): State<App>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = app.shared.subscribe();
    let hello = futures::stream::once(async { Ok(Event::default().event("hello").data("{}")) });
    let updates = tokio_stream::wrappers::BroadcastStream::new(rx).map(|item| {
        Ok(match item {
            Ok(push) => push.to_sse(),
            Err(_lagged) => Event::default().event("resync").data("{}"),
        })
    });
    let stop = app.shared.shutdown().clone().cancelled_owned();
    Sse::new(hello.chain(updates).take_until(stop)).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities() {
        assert!(is_loopback_authority("127.0.0.1:37123"));
        assert!(is_loopback_authority("localhost:1"));
        assert!(is_loopback_authority("[::1]:8080"));
        assert!(is_loopback_authority("localhost"));
        assert!(!is_loopback_authority("evil.example:37123"));
        assert!(!is_loopback_authority(""));
    }
}
