//! Shared test fixtures: apigate's real HTTP server started in-process on 127.0.0.1:0, MCP
//! clients for it, and a recording upstream API (an axum app serving part of the petstore).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use apigate::cli::dev::EngineArgs;
use apigate::http::{self, Allowed, HttpOptions, KeyCheck};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub const KEY: &str = "test-key-0123456789abcdef";

pub fn spec_path(name: &str) -> String {
    format!("{}/../shared/specs/{name}", env!("CARGO_MANIFEST_DIR"))
}

pub fn engine_args(spec: &str, upstream: Option<String>) -> EngineArgs {
    EngineArgs {
        spec: spec.to_string(),
        upstream,
        upstream_headers: vec!["Authorization: Bearer upstream-secret-token".into()],
        upstream_timeout: 2,
        connect_timeout: 2,
        max_response_bytes: 64 * 1024,
        monitor: apigate::monitor::MonitorFlags {
            monitor: None,
            monitor_timeout: std::time::Duration::from_secs(2),
            monitor_project: None,
            monitor_worktree: None,
        },
    }
}

/// A running apigate HTTP server.
pub struct Server {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
}

impl Server {
    pub async fn start(args: EngineArgs, stateless: bool) -> Server {
        Server::start_with(args, stateless, Allowed::default()).await
    }

    pub async fn start_with(args: EngineArgs, stateless: bool, allowed: Allowed) -> Server {
        let engine = Arc::new(args.build().await.expect("engine builds"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let router = http::router(
            engine,
            HttpOptions {
                keys: KeyCheck::Single(KEY.into()),
                stateless,
                allowed,
                max_body_bytes: 256 * 1024,
                mode: "development",
                admin: None,
                store: None,
            },
            shutdown.clone(),
        );
        tokio::spawn(http::serve(listener, router, shutdown.clone()));
        Server { addr, shutdown }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// An rmcp client over Streamable HTTP, sending the API key.
    pub async fn client(&self) -> RunningService<RoleClient, ()> {
        mcp_client(&self.url("/mcp"), &[("x-api-key", KEY)]).await
    }
}

/// An rmcp client over Streamable HTTP for any MCP endpoint URL, sending `headers`.
pub async fn mcp_client(url: &str, headers: &[(&str, &str)]) -> RunningService<RoleClient, ()> {
    let headers: HashMap<_, _> = headers
        .iter()
        .map(|(name, value)| {
            (
                axum::http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                axum::http::header::HeaderValue::from_str(value).unwrap(),
            )
        })
        .collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    ().serve(transport).await.expect("MCP client connects")
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Calls a tool and returns (isError, structured content). Takes a running client (it
/// derefs to its `Peer`) or a cloned `Peer` (for calls spawned in the background).
pub async fn call(client: &Peer<RoleClient>, tool: &str, args: Value) -> (bool, Value) {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map))
        .await
        .expect("tools/call answers");
    let value = result.structured_content.clone().unwrap_or(Value::Null);
    (result.is_error.unwrap_or(false), value)
}

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: Method,
    /// Path and query exactly as sent.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// A recording upstream: a petstore subset under `/v2` plus a few misbehaving routes.
pub struct Upstream {
    pub addr: SocketAddr,
    state: Arc<UpstreamState>,
}

#[derive(Default)]
struct UpstreamState {
    received: Mutex<Vec<Received>>,
    /// Where `GET /v2/user/redirect` points.
    redirect_to: Mutex<String>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let state: Arc<UpstreamState> = Arc::default();
        let app = Router::new().fallback(petstore).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Upstream { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Makes `GET /v2/user/redirect` answer 302 to `to`.
    pub fn redirect_to(&self, to: &str) {
        *self.state.redirect_to.lock().unwrap() = to.to_string();
    }
}

async fn petstore(
    State(state): State<Arc<UpstreamState>>,
    request: Request,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let uri = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    state.received.lock().unwrap().push(Received {
        method: parts.method.clone(),
        uri: uri.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let path = parts.uri.path();
    match (parts.method.as_str(), path) {
        ("GET", "/v2/pet/findByStatus") => {
            axum::Json(json!([{"id": 1, "name": "Rex", "status": "available", "photoUrls": []}]))
                .into_response()
        }
        ("GET", p) if p.starts_with("/v2/pet/") => {
            let id = p.trim_start_matches("/v2/pet/");
            match id.parse::<i64>() {
                Ok(500) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(json!({"message": "boom"})),
                )
                    .into_response(),
                Ok(n) => axum::Json(
                    json!({"id": n, "name": "Rex", "status": "available", "photoUrls": []}),
                )
                .into_response(),
                Err(_) => (
                    StatusCode::NOT_FOUND,
                    axum::Json(json!({"message": "Pet not found"})),
                )
                    .into_response(),
            }
        }
        ("POST", "/v2/pet") => {
            let mut pet: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            pet["id"] = json!(99);
            axum::Json(pet).into_response()
        }
        ("DELETE", p) if p.starts_with("/v2/pet/") => StatusCode::OK.into_response(),
        ("GET", "/v2/user/slow") => {
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            StatusCode::OK.into_response()
        }
        ("GET", "/v2/user/big") => {
            let item =
                json!({"username": "x".repeat(100), "email": "someone@example.com"}).to_string();
            let body = format!("[{}]", vec![item; 80_000].join(","));
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response()
        }
        ("GET", "/v2/user/redirect") => {
            let to = state.redirect_to.lock().unwrap().clone();
            (StatusCode::FOUND, [(axum::http::header::LOCATION, to)]).into_response()
        }
        ("GET", p) if p.starts_with("/v2/user/") => {
            axum::Json(json!({"username": p.trim_start_matches("/v2/user/")})).into_response()
        }
        _ => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "no such route"})),
        )
            .into_response(),
    }
}
