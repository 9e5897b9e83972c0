//! Thin axum adapter: `/mcp` (Streamable HTTP, stateful or stateless), legacy `/sse` +
//! `/message`, `/health`, `/metrics` (with the key, or alone on `--metrics-listen`),
//! `/.well-known/jwks.json` (the identity assertions' public keys), and the
//! middleware in front of them (Host/Origin check, body limit, `x-api-key`, MCP session owners). Holds no SQL and no tantivy calls; tools run in `tools::Engine`.

pub mod admin;
mod conn;
mod drain;
mod error;
mod guard;
mod sessions;
mod sse;
mod step_up;
mod tool_call;
mod tool_list;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub use conn::{ConnLimits, peer, serve};
pub use guard::{Allowed, KeyCheck, OAuthGate};

use crate::apis::reload::Reloader;
use crate::mcp::McpServer;
use crate::tools::Engine;
use crate::types::Code;

/// Default cap on request bodies.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How the HTTP server behaves; built by the CLI.
pub struct HttpOptions {
    pub keys: KeyCheck,
    pub stateless: bool,
    pub allowed: Allowed,
    pub max_body_bytes: usize,
    /// `development` or `production`, as `/health` reports it.
    pub mode: &'static str,
    /// `/admin/v1/*` (production).
    pub admin: Option<Router>,
    /// The database `/health` pings through `Auth::ping` (503 while it is down).
    pub database: Option<crate::auth::Auth>,
    /// Live MCP sessions (Streamable HTTP, and legacy SSE apart) one key may hold.
    pub max_sessions_per_key: usize,
    /// How long a Streamable HTTP session may go without a request before it is closed, and
    /// a `subscriptions/listen` stream without a notification before it is ended.
    pub session_idle: std::time::Duration,
    /// `--max-connections`: one key's listen streams hold at most half of them.
    pub max_connections: usize,
    /// Messages a legacy SSE session queues in each direction.
    pub sse_queue: usize,
    /// `POST /admin/v1/reload`: reloads the APIs (absent: the route answers 404).
    pub reload: Option<Arc<Reloader>>,
    /// Bearer tokens from trusted issuers (production with `--oauth-issuer`).
    pub oauth: Option<OAuthGate>,
    /// `--drain-timeout`: after shutdown, how long requests in flight may take before the
    /// sessions are ended (`drain.rs`).
    pub drain_timeout: std::time::Duration,
}

impl HttpOptions {
    /// The defaults for everything but who may connect.
    pub fn new(keys: KeyCheck, mode: &'static str) -> HttpOptions {
        HttpOptions {
            keys,
            stateless: false,
            allowed: Allowed::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            mode,
            admin: None,
            database: None,
            max_sessions_per_key: sessions::DEFAULT_MAX_SESSIONS_PER_KEY,
            session_idle: sessions::SESSION_IDLE,
            max_connections: ConnLimits::default().max_connections,
            sse_queue: sse::DEFAULT_QUEUE,
            reload: None,
            oauth: None,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

/// Default of `--drain-timeout`.
pub const DEFAULT_DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(25);

pub(crate) use sessions::DEFAULT_MAX_SESSIONS_PER_KEY;
pub(crate) use sse::DEFAULT_QUEUE as DEFAULT_SSE_QUEUE;

/// Shared by every handler.
pub(crate) struct AppState {
    pub engine: Arc<Engine>,
    pub keys: KeyCheck,
    pub allowed: Allowed,
    pub max_body_bytes: usize,
    pub mode: &'static str,
    database: Option<crate::auth::Auth>,
    sse: sse::SseSessions,
    sse_queue: usize,
    sessions: Arc<sessions::McpSessions>,
    /// The server's tool list: its handlers serve it, and plain `tools/list` requests are
    /// answered from it (`tool_list`).
    tool_list: crate::mcp::ToolList,
    reload: Option<Arc<Reloader>>,
    oauth: Option<OAuthGate>,
    /// Requests in flight and whether the server drains (`/ready`).
    drain: Arc<drain::Drain>,
}

/// The process-wide Prometheus recorder (installed once, on first use).
pub(crate) fn metrics_handle() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ];
            let recorder = PrometheusBuilder::new()
                .set_buckets(&buckets)
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Builds the router. When `shutdown` is cancelled it drains: `/ready` says no, requests in
/// flight finish (at most `opts.drain_timeout`), then every open MCP session ends.
pub fn router(engine: Arc<Engine>, opts: HttpOptions, shutdown: CancellationToken) -> Router {
    metrics_handle();
    let drain = Arc::new(drain::Drain::default());
    tokio::spawn(drain.clone().run(shutdown.clone(), opts.drain_timeout));
    let manager = (!opts.stateless).then(|| Arc::new(sessions::session_manager()));
    // Sessions held on every replica count against --max-sessions-per-key (production).
    let leases = match (&opts.keys, &manager) {
        (KeyCheck::Database(auth), Some(_)) => Some(auth.leases()),
        _ => None,
    };
    if let Some(leases) = &leases {
        tokio::spawn(leases.clone().renew(drain.sessions()));
    }
    let state = Arc::new(AppState {
        engine: engine.clone(),
        keys: opts.keys,
        allowed: opts.allowed,
        max_body_bytes: opts.max_body_bytes,
        mode: opts.mode,
        database: opts.database,
        sse: sse::SseSessions::default(),
        sse_queue: opts.sse_queue.max(1),
        sessions: Arc::new(sessions::McpSessions::new(
            manager.clone(),
            opts.max_sessions_per_key,
            opts.session_idle,
            opts.max_connections,
            leases,
        )),
        tool_list: crate::mcp::ToolList::new(&engine),
        reload: opts.reload,
        oauth: opts.oauth,
        drain: drain.clone(),
    });
    if manager.is_some() {
        tokio::spawn(state.sessions.clone().expire_idle(shutdown.clone()));
    }
    // Host/Origin are checked by our middleware for every route, so rmcp's own check is off.
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(Vec::<String>::new())
        .with_max_request_body_bytes(opts.max_body_bytes)
        .with_cancellation_token(drain.sessions().child_token());
    let mcp_service: Router<Arc<AppState>> = if let Some(manager) = manager {
        let factory = McpServer::factory(engine.clone(), true, &state.tool_list);
        let svc = StreamableHttpService::new(factory, manager, config);
        Router::new().nest_service("/mcp", svc)
    } else {
        let svc = StreamableHttpService::new(
            McpServer::factory(engine.clone(), false, &state.tool_list),
            Arc::new(NeverSessionManager::default()),
            config
                .with_legacy_session_mode(false)
                .with_json_response(true),
        );
        Router::new().nest_service("/mcp", svc)
    };
    let protected = mcp_service
        .layer(middleware::from_fn_with_state(
            state.clone(),
            sessions::gate,
        ))
        .route("/sse", get(sse::open))
        .route("/message", post(sse::message))
        .route("/metrics", get(render_metrics))
        .route("/admin/v1/reload", post(reload))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::api_key,
        ));
    let mut app: Router = Router::new()
        .merge(protected)
        .route("/health", get(health))
        .route("/ready", get(drain::ready))
        .route("/.well-known/jwks.json", get(jwks))
        .route(
            "/.well-known/oauth-protected-resource",
            get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*resource}",
            get(resource_metadata),
        )
        .route("/.well-known/{*rest}", any(no_oauth))
        .route("/register", any(no_oauth))
        .route("/authorize", any(no_oauth))
        .route("/token", any(no_oauth))
        .fallback(not_found)
        .with_state(state.clone());
    if let Some(admin) = opts.admin {
        app = app.merge(admin);
    }
    let sensitive: std::sync::Arc<[axum::http::HeaderName]> = vec![
        axum::http::HeaderName::from_static("x-api-key"),
        axum::http::HeaderName::from_static(crate::auth::SESSION_TOKEN_HEADER),
        axum::http::header::AUTHORIZATION,
    ]
    .into();
    app.layer(middleware::from_fn(count_requests))
        .layer(middleware::from_fn_with_state(state.clone(), drain::track))
        .layer(DefaultBodyLimit::max(opts.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), body_limit))
        .layer(middleware::from_fn_with_state(
            state,
            guard::host_and_origin,
        ))
        .layer(
            tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer::from_shared(sensitive),
        )
}

/// 413 for a declared body over the limit. Streamed bodies are capped where they are read:
/// rmcp's own limit on `/mcp` (set to the same value) and `to_bytes` on `/message`.
async fn body_limit(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > state.max_body_bytes) {
        return error::too_large(state.max_body_bytes);
    }
    next.run(request).await
}

async fn count_requests(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| {
            let p = request.uri().path();
            if p.starts_with("/mcp") {
                "/mcp".into()
            } else {
                "other".into()
            }
        });
    // Labels come from fixed sets: a label per made-up method would grow memory without end.
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("apigate_http_requests_total", "method" => method, "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("apigate_http_request_duration_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

/// The method as a metrics label: the standard ones, and `other`.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

async fn not_found() -> Response {
    error::json_error(Code::NotFound, "not found")
}

/// RFC 9728 protected resource metadata: where to get a token for this server. Public (a
/// client reads it before it has a token); 404 without `--oauth-issuer`.
async fn resource_metadata(State(state): State<Arc<AppState>>) -> Response {
    match &state.oauth {
        Some(gate) if gate.mode != crate::types::AuthMode::Keys => (
            [(axum::http::header::CACHE_CONTROL, "public, max-age=300")],
            Json(gate.server.metadata()),
        )
            .into_response(),
        _ => no_oauth().await,
    }
}

/// MCP clients that get a 401 go looking for OAuth (metadata, dynamic client registration)
/// and show whatever that last request answered. Say what to fix instead of "not found".
async fn no_oauth() -> Response {
    error::json_error(
        Code::NotFound,
        "apigate does not use OAuth: it authenticates with an API key in the x-api-key header, \
         and the key this client sent was missing or wrong (check the client's MCP server \
         configuration; `apigate config claude|opencode` prints a working one)",
    )
}

/// The public keys that verify identity assertions (no key needed: they are public). Without
/// `--identity-header` there are none, and the path is unknown.
async fn jwks(State(state): State<Arc<AppState>>) -> Response {
    match &state.engine.identity {
        Some(identity) => (
            [
                (axum::http::header::CONTENT_TYPE, "application/jwk-set+json"),
                (axum::http::header::CACHE_CONTROL, "public, max-age=300"),
            ],
            identity.jwks().to_string(),
        )
            .into_response(),
        None => error::json_error(
            Code::NotFound,
            "this server signs no identity assertions (start it with --identity-header and \
             --signing-key), so it publishes no keys",
        ),
    }
}

/// `POST /admin/v1/reload`: the key that passed the guard must be the operator's (dev) or
/// hold `apigate.admin` (production).
async fn reload(
    State(state): State<Arc<AppState>>,
    axum::Extension(caller): axum::Extension<crate::mcp::HttpCaller>,
) -> Response {
    let Some(reloader) = &state.reload else {
        return error::json_error(Code::NotFound, "this server does not reload");
    };
    // A signed-in person needs the feature in their token (with a key too, in both); a key
    // alone in its own features; the dev key has every one. Audited as who asked: the key, or
    // the token's client (`oauth:CLIENT`).
    let asker = match (&caller.bearer, &caller.key) {
        (Some(p), _) => Some(p.acting_key()),
        (None, key) => key.clone(),
    };
    let allowed = asker
        .as_ref()
        .is_none_or(|k| k.features.allows(crate::auth::ADMIN_FEATURE));
    if !allowed {
        if let (Some(auth), Some(key)) = (&state.database, &asker) {
            auth.record_admin_refusal(
                Some(key),
                "",
                "POST",
                Some("/admin/v1/reload"),
                Code::Forbidden,
            )
            .await;
        }
        let missing = crate::auth::ADMIN_FEATURE.into();
        return error::ApiError::from(crate::auth::AuthError::Forbidden { missing })
            .into_response();
    }
    match reloader.reload_now(asker.as_ref()).await {
        Ok(report) => Json(report).into_response(),
        Err(e) => error::ApiError::from(e).into_response(),
    }
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    let apis = state.engine.apis();
    let database = match &state.database {
        None => None,
        Some(auth) => Some(
            match tokio::time::timeout(std::time::Duration::from_secs(3), auth.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("no answer within 3 s".to_string()),
            },
        ),
    };
    if let Some(Err(e)) = &database {
        tracing::warn!(error = %e, "health: the database is unreachable");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "unavailable", "mode": state.mode, "database": "unreachable",
                "error": "the database does not answer; tool calls fail until it is back",
            })),
        )
            .into_response();
    }
    let oauth = state
        .oauth
        .as_ref()
        .map(|g| json!({"issuers": g.server.health(), "resource": g.server.settings().audience}));
    Json(json!({
        "status": "ok",
        "database": if database.is_some() { "ok" } else { "none" },
        // The trusted issuers and whether their keys are loaded (null without OAuth).
        "oauth": oauth,
        "mode": state.mode,
        "tools": crate::tools::Tool::ALL.len(),
        "operations": apis.operations(),
        // Anyone may ask: a file's name without its directory, a URL without credentials.
        "specs": apis.list.iter().map(|a| {
            let spec = &a.spec;
            let mut shown = json!({"title": spec.title, "version": spec.api_version,
                "source": spec.public_source(),
                "operations": spec.operations.len(),
                "sha256": spec.sha256,
                "loadedAt": a.loaded.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "lastError": a.loaded.error});
            if apis.qualified() {
                shown["name"] = serde_json::Value::String(a.name.clone());
            }
            shown
        }).collect::<Vec<_>>(),
        "ranker": apis.index.ranker().as_str(),
        // The model that ranks with the words (name and hash of its files), or will once the
        // operations are embedded (`ranker` still "lexical"); null for words only.
        "model": apis.index.model(),
    }))
    .into_response()
}

/// `/metrics` alone and without a key, for a Prometheus scraper on a separate listener
/// (`--metrics-listen`). On the main listener `/metrics` needs the API key like `/mcp`.
pub fn metrics_router() -> Router {
    metrics_handle();
    Router::new()
        .route("/metrics", get(render_metrics))
        .fallback(not_found)
        .layer(middleware::from_fn(count_requests))
}

async fn render_metrics() -> Response {
    match metrics_handle() {
        Some(h) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4",
            )],
            h.render(),
        )
            .into_response(),
        None => error::json_error(
            Code::MetricsUnavailable,
            "another metrics recorder is installed in this process",
        ),
    }
}

/// Cancels `token` on Ctrl-C or SIGTERM.
pub(crate) fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => {
                        let _ = ctrl_c.await;
                        token.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        token.cancel();
    });
}
