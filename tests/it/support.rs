//! Shared test fixtures: apigate's real HTTP server started in-process on 127.0.0.1:0, MCP
//! clients for it, a recording upstream API (an axum app serving part of the petstore), the
//! `apigate` binary as a child process, and a TCP proxy to Postgres that a test can cut.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apigate::cli::args::EngineArgs;
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
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

pub const KEY: &str = "test-key-0123456789abcdef";

pub fn spec_path(name: &str) -> String {
    format!("{}/tests/data/specs/{name}", env!("CARGO_MANIFEST_DIR"))
}

pub fn engine_args(spec: &str, upstream: Option<String>) -> EngineArgs {
    EngineArgs {
        spec: spec.to_string(),
        upstream,
        upstream_headers: vec!["Authorization: Bearer upstream-secret-token".into()],
        upstream_credentials: Vec::new(),
        oauth: Default::default(),
        upstream_timeout: std::time::Duration::from_secs(2),
        connect_timeout: std::time::Duration::from_secs(2),
        max_response_bytes: 64 * 1024,
        max_read_bytes: apigate::upstream::DEFAULT_MAX_READ_BYTES,
        binary: Default::default(),
        monitor: apigate::cli::monitor::MonitorFlags {
            monitor: None,
            monitor_timeout: std::time::Duration::from_secs(2),
            monitor_project: None,
            monitor_worktree: None,
        },
        // Words only, on purpose: loading the model in every test server would slow the suite.
        // The semantic tests (`dense.rs`) set the ranking they test.
        ranking: apigate::cli::index::RankingArgs::lexical(),
        limits: Default::default(),
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
        Server::start_custom(
            args,
            |o| {
                o.stateless = stateless;
                o.allowed = allowed;
            },
            http::ConnLimits::default(),
        )
        .await
    }

    /// A dev-mode server whose HTTP options and connection limits the test adjusts.
    pub async fn start_custom(
        args: EngineArgs,
        options: impl FnOnce(&mut HttpOptions),
        limits: http::ConnLimits,
    ) -> Server {
        let engine = args.build().await.expect("engine builds");
        Server::start_engine(engine, options, limits).await
    }

    /// [`Server::start_custom`] with the engine built (and adjusted) by the test.
    pub async fn start_engine(
        engine: apigate::tools::Engine,
        options: impl FnOnce(&mut HttpOptions),
        limits: http::ConnLimits,
    ) -> Server {
        let engine = Arc::new(engine);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let mut opts = HttpOptions::new(KeyCheck::Single(KEY.into()), "development");
        opts.max_body_bytes = 256 * 1024;
        options(&mut opts);
        let router = http::router(engine, opts, shutdown.clone());
        tokio::spawn(http::serve(listener, router, shutdown.clone(), limits));
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

/// An rmcp client over the legacy HTTP+SSE transport of the server at `base`: `GET /sse` and
/// every `POST /message` send `headers`.
pub async fn sse_client(base: &str, headers: &[(&str, &str)]) -> RunningService<RoleClient, ()> {
    sse_client_with(base, headers, headers).await
}

/// [`sse_client`] sending `stream_headers` with `GET /sse` and `message_headers` with each
/// `POST /message`.
pub async fn sse_client_with(
    base: &str,
    stream_headers: &[(&str, &str)],
    message_headers: &[(&str, &str)],
) -> RunningService<RoleClient, ()> {
    use futures::StreamExt;
    use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};

    let client_with = |headers: &[(&str, &str)]| {
        let mut header_map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            header_map.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                reqwest::header::HeaderValue::from_str(value).unwrap(),
            );
        }
        reqwest::Client::builder()
            .default_headers(header_map)
            .build()
            .unwrap()
    };
    let http = client_with(message_headers);
    let response = client_with(stream_headers)
        .get(format!("{base}/sse"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut bytes = response.bytes_stream();
    let (tx, rx) = futures::channel::mpsc::unbounded::<(String, String)>();
    tokio::spawn(async move {
        let mut buf = String::new();
        while let Some(Ok(chunk)) = bytes.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let mut event = "message".to_string();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(e) = line.strip_prefix("event:") {
                        event = e.trim().to_string();
                    } else if let Some(d) = line.strip_prefix("data:") {
                        data.push_str(d.trim_start());
                    }
                }
                if !data.is_empty() && tx.unbounded_send((event, data)).is_err() {
                    return;
                }
            }
        }
    });
    let mut rx = rx;
    let (event, endpoint) = rx.next().await.unwrap();
    assert_eq!(event, "endpoint");
    assert!(endpoint.starts_with("/message?sessionId="), "{endpoint}");
    let post_url = format!("{base}{endpoint}");
    let stream = rx.filter_map(|(event, data)| async move {
        (event == "message")
            .then(|| serde_json::from_str::<ServerJsonRpcMessage>(&data).ok())
            .flatten()
    });
    let sink = futures::sink::unfold(
        (http, post_url),
        |(http, url), msg: ClientJsonRpcMessage| async move {
            let r = http
                .post(&url)
                .json(&msg)
                .send()
                .await
                .map_err(std::io::Error::other)?;
            if r.status() != 202 {
                return Err(std::io::Error::other(format!(
                    "POST /message answered {}",
                    r.status()
                )));
            }
            Ok::<_, std::io::Error>((http, url))
        },
    );
    ().serve((Box::pin(sink), Box::pin(stream)))
        .await
        .expect("SSE client initializes")
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

/// A child process killed when dropped; its stderr is kept for failure messages.
pub struct Proc {
    pub name: &'static str,
    pub child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    /// Spawns `apigate ARGS` and waits for a stderr line containing `marker`; returns the
    /// process and the first `http://…` URL on that line.
    pub async fn spawn(name: &'static str, args: &[&str], marker: &str) -> (Proc, String) {
        Proc::spawn_with_env(name, args, &[], marker).await
    }

    /// [`Proc::spawn`] with these environment variables set (after the test environment's
    /// apigate variables are removed); an empty value removes the variable (`RUST_LOG`,
    /// `NO_COLOR`).
    pub async fn spawn_with_env(
        name: &'static str,
        args: &[&str],
        env: &[(&str, &str)],
        marker: &str,
    ) -> (Proc, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_apigate"));
        command
            .args(args)
            // Nothing from the test environment may change what these processes do.
            .env_remove("DATABASE_URL")
            .env_remove("APIGATE_API_KEY")
            .env_remove("MCP_SERVER_API_KEY")
            .env_remove("APIGATE_MONITOR_URL")
            .env_remove("APIGATE_MONITOR_TIMEOUT")
            .env_remove("APIGATE_MONITOR_LISTEN")
            .env_remove("APIGATE_UPSTREAM_HEADERS")
            .env_remove("APIGATE_EMBEDDING_MODEL")
            .env_remove("APIGATE_CACHE_DIR")
            .env_remove("APIGATE_INDEX")
            // Words only unless a test asks for the default (`("APIGATE_RANKER", "")`): the
            // model's background pass would only slow the suite.
            .env("APIGATE_RANKER", "lexical")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .current_dir(env!("CARGO_TARGET_TMPDIR"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in env {
            if value.is_empty() {
                command.env_remove(name);
            } else {
                command.env(name, value);
            }
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start apigate {name}: {e}"));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr: Arc<Mutex<Vec<String>>> = Arc::default();
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                stderr.lock().unwrap().push(line.clone());
                if line.contains(marker)
                    && let Some(at) = line.find("http://")
                {
                    let url: String = line[at..]
                        .chars()
                        .take_while(|c| !c.is_whitespace())
                        .collect();
                    return Some(url);
                }
            }
            None
        })
        .await;
        let url = match found {
            Ok(Some(url)) => url,
            other => panic!(
                "apigate {name} did not start ({}):\n{}",
                if other.is_err() {
                    "no address within 60 s"
                } else {
                    "it exited"
                },
                stderr.lock().unwrap().join("\n")
            ),
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        let sink = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let proc = Proc {
            name,
            child,
            stderr,
        };
        (proc, url)
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited cleanly.
    pub async fn terminate(&mut self) -> bool {
        let pid = self.child.id().expect("the process is still running");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM {pid} failed");
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("apigate {} ignored SIGTERM\n{}", self.name, self.log()))
            .unwrap();
        status.success()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    pub fn log(&self) -> String {
        format!(
            "--- apigate {} stderr ---\n{}",
            self.name,
            self.stderr.lock().unwrap().join("\n")
        )
    }
}

/// A TCP proxy to Postgres that can be cut and restored. [`CutProxy::cut`] closes every
/// connection and closes new ones as soon as they are accepted (a network failure);
/// [`CutProxy::refuse`] closes every connection and the port itself, so new connections are
/// refused (the database is down).
pub struct CutProxy {
    pub addr: SocketAddr,
    target: String,
    cut: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    /// The accept loop; `None` while the port is closed.
    accept: Mutex<Option<AbortHandle>>,
}

impl CutProxy {
    /// A proxy in front of the server of `database_url`, and the same URL through the proxy.
    pub async fn for_database(database_url: &str) -> (CutProxy, String) {
        let mut url = url::Url::parse(database_url).expect("the database URL parses");
        let target = format!(
            "{}:{}",
            url.host_str().expect("the database URL has a host"),
            url.port().unwrap_or(5432)
        );
        let proxy = CutProxy::start(target).await;
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(proxy.addr.port())).unwrap();
        (proxy, url.to_string())
    }

    pub async fn start(target: String) -> CutProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = CutProxy {
            addr,
            target,
            cut: Arc::new(AtomicBool::new(false)),
            connections: Arc::default(),
            accept: Mutex::new(None),
        };
        proxy.accept_on(listener);
        proxy
    }

    fn accept_on(&self, listener: tokio::net::TcpListener) {
        let (cut, connections, target) = (
            self.cut.clone(),
            self.connections.clone(),
            self.target.clone(),
        );
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if cut.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                connections.lock().unwrap().push(task.abort_handle());
            }
        });
        *self.accept.lock().unwrap() = Some(accept.abort_handle());
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    /// Cuts, and closes the port: connecting is refused until [`CutProxy::restore`].
    pub fn refuse(&self) {
        self.cut();
        if let Some(accept) = self.accept.lock().unwrap().take() {
            accept.abort();
        }
    }

    /// Forwards again (on the same port, listening again after [`CutProxy::refuse`]).
    pub fn restore(&self) {
        if self.accept.lock().unwrap().is_none() {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            socket
                .bind(self.addr)
                .unwrap_or_else(|e| panic!("cannot listen again on {}: {e}", self.addr));
            self.accept_on(socket.listen(128).unwrap());
        }
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.refuse();
    }
}
