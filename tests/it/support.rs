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
        spec: Some(spec.to_string()),
        config: None,
        upstream,
        upstream_headers: vec!["Authorization: Bearer upstream-secret-token".into()],
        upstream_credentials: Vec::new(),
        oauth: Default::default(),
        upstream_timeout: std::time::Duration::from_secs(2),
        connect_timeout: std::time::Duration::from_secs(2),
        max_response_bytes: 64 * 1024,
        max_read_bytes: apigate::upstream::DEFAULT_MAX_READ_BYTES,
        max_call_bytes: apigate::upstream::DEFAULT_MAX_CALL_BYTES,
        max_bytes_in_flight: apigate::upstream::DEFAULT_MAX_BYTES_IN_FLIGHT,
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
        spec_limits: Default::default(),
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
        let (listener, _) = Server::listen().await;
        let mut opts = HttpOptions::new(KeyCheck::Single(KEY.into()), "development");
        opts.max_body_bytes = 256 * 1024;
        options(&mut opts);
        Server::serve(listener, engine, opts, limits)
    }

    /// A listener on a fresh port of 127.0.0.1 and its address, for an engine that must know
    /// its own URL (an identity issuer) before [`Server::serve`] serves it there.
    pub async fn listen() -> (tokio::net::TcpListener, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (listener, addr)
    }

    /// Serves `engine` with exactly these options on `listener` until dropped.
    pub fn serve(
        listener: tokio::net::TcpListener,
        engine: apigate::tools::Engine,
        options: HttpOptions,
        limits: http::ConnLimits,
    ) -> Server {
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let router = http::router(Arc::new(engine), options, shutdown.clone());
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

/// The recording petstore [`Upstream`], a dev server on the petstore spec in front of it, and
/// a client of that server.
pub async fn petstore_client(
    stateless: bool,
) -> (Upstream, Server, RunningService<RoleClient, ()>) {
    let upstream = Upstream::start().await;
    let args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    let server = Server::start(args, stateless).await;
    let client = server.client().await;
    (upstream, server, client)
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
    let (err, value, _) = call_shown(client, tool, args).await;
    (err, value)
}

/// A tool call as the agent sees it: (isError, structured content, the whole result, content
/// and structured content, serialized).
pub async fn call_shown(
    client: &Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> (bool, Value, String) {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map))
        .await
        .expect("tools/call answers");
    let text = serde_json::to_string(&result).unwrap();
    let value = result.structured_content.unwrap_or(Value::Null);
    (result.is_error.unwrap_or(false), value, text)
}

/// The URIs of the resources `client` lists.
pub async fn resource_uris(client: &Peer<RoleClient>) -> Vec<String> {
    let listed = client.list_resources(None).await.unwrap().resources;
    listed.into_iter().map(|r| r.uri.clone()).collect()
}

/// [`call`], asserting the tool succeeded; returns its structured content.
pub async fn call_ok(client: &Peer<RoleClient>, tool: &str, args: Value) -> Value {
    let (err, r) = call(client, tool, args.clone()).await;
    assert!(!err, "{tool} {args}: {r}");
    r
}

/// [`call`], asserting the tool failed with error `code`; returns its structured content for
/// the test's own checks of the details.
pub async fn call_err(client: &Peer<RoleClient>, tool: &str, args: Value, code: &str) -> Value {
    assert_tool_error(call(client, tool, args.clone()).await, code, &args)
}

/// Asserts a [`call`]'s result is a tool error with `code` (`context` says which call, in the
/// failure message); returns its structured content.
#[track_caller]
pub fn assert_tool_error(
    (err, r): (bool, Value),
    code: &str,
    context: &dyn std::fmt::Display,
) -> Value {
    assert!(err, "{context}: succeeded, {code} expected: {r}");
    assert_eq!(r["code"], code, "{context}: {r}");
    r
}

/// `api_execute` with these arguments, asserting it succeeded; returns its structured content.
pub async fn execute_ok(client: &Peer<RoleClient>, args: Value) -> Value {
    call_ok(client, "api_execute", args).await
}

/// `api_execute` with these arguments, asserting it failed with `code`.
pub async fn execute_err(client: &Peer<RoleClient>, args: Value, code: &str) -> Value {
    call_err(client, "api_execute", args, code).await
}

/// Sends `request` and returns the answer's body as text (whatever its status).
pub async fn send_text(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

/// Sends `request` and returns the answer's body as JSON (whatever its status).
pub async fn send_json(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// `GET url` without headers; the answer's body as JSON (whatever its status).
pub async fn get_json(url: impl reqwest::IntoUrl) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// `/metrics` of the server at `base` (`http://host:port`), read with the test [`KEY`].
pub async fn metrics(base: &str) -> String {
    send_text(
        reqwest::Client::new()
            .get(format!("{base}/metrics"))
            .header("x-api-key", KEY),
    )
    .await
}

/// The string field `field` of each item of the array `list` (panics naming `list` if it is
/// not an array of such items).
pub fn strings<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|item| {
            item[field]
                .as_str()
                .unwrap_or_else(|| panic!("no string {field} in {item}"))
        })
        .collect()
}

/// A header's value as text ("" when it is missing or not text).
pub fn header_text(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A port of 127.0.0.1 that nothing listens on: to start a server on, or to be refused by.
///
/// Chosen below Linux's ephemeral range (32768 and up), where `bind(0)` and every outgoing
/// connection get their ports: a port freed by `bind(0)` could be handed to another socket
/// before the server this test starts binds it. Here each call takes the next port after a
/// start that differs per process, so two calls do not return the same port either.
pub fn free_port() -> u16 {
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: std::sync::OnceLock<std::sync::atomic::AtomicU32> = std::sync::OnceLock::new();
    let next = NEXT.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        std::sync::atomic::AtomicU32::new(std::process::id().wrapping_mul(7919) ^ nanos)
    });
    for _ in 0..SPAN {
        let port = (LOW + next.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port of 127.0.0.1 in {LOW}..{}", LOW + SPAN)
}

/// Serves `app` on a fresh port of 127.0.0.1 in the background; returns the address.
pub async fn serve_app(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Polls `check` every `every` until it gives `Some`, for at most `limit`; `what` says, in
/// the failure message, what still holds when time is up.
pub async fn poll<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(done) = check().await {
            return done;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} after {limit:?}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Reads the first event of a legacy SSE stream (the answer to `GET /sse`) and returns the
/// `/message?sessionId=…` endpoint it announces; the rest of the stream stays unread.
pub async fn sse_endpoint(stream: &mut reqwest::Response) -> String {
    assert_eq!(stream.status(), 200);
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = stream.chunk().await.unwrap().expect("the endpoint event");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let data = text.lines().find_map(|l| l.strip_prefix("data:"));
    let endpoint = data.expect("a data line").trim().to_string();
    assert!(endpoint.starts_with("/message?sessionId="), "{endpoint}");
    endpoint
}

/// Asserts each field of the object `want` has that value in `got` (`null` for a field that
/// is null or missing).
#[track_caller]
pub fn assert_fields(got: &Value, want: Value) {
    for (field, value) in want.as_object().expect("an object of fields") {
        assert_eq!(&got[field], value, "{field} in {got}");
    }
}

/// Owned strings of a list of features or roles.
pub fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| i.to_string()).collect()
}

/// A server key named `name` holding `features`, created with `auth`; the key itself.
pub async fn key_holding(auth: &apigate::auth::Auth, name: &str, features: &[&str]) -> String {
    let key = apigate::auth::NewKey {
        name: name.into(),
        features: owned(features),
        ..Default::default()
    };
    auth.create_key(key).await.unwrap().key
}

/// A session created with `auth`; its token.
pub async fn session_token(
    auth: &apigate::auth::Auth,
    session: apigate::auth::NewSession,
) -> String {
    auth.create_session(session).await.unwrap().token
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
        let addr = serve_app(app).await;
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
        // Words only unless a test asks for the default (`("APIGATE_RANKER", "")`): the
        // model's background pass would only slow the suite.
        let defaults = [
            ("APIGATE_RANKER", "lexical"),
            ("RUST_LOG", "info"),
            ("NO_COLOR", "1"),
        ];
        let mut command = apigate_command(args, &defaults, env);
        command.stdout(Stdio::null()).stderr(Stdio::piped());
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

/// `apigate ARGS` with nothing from the test environment, then `defaults` and `env` set (an
/// empty value removes the variable).
fn apigate_command(args: &[&str], defaults: &[(&str, &str)], env: &[(&str, &str)]) -> Command {
    // `APIGATE_TEST_BIN` runs a copy of the binary (a target directory shared by several
    // builds may replace the one built with these tests while they run).
    let bin = std::env::var_os("APIGATE_TEST_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_apigate").into());
    let mut command = Command::new(bin);
    command.args(args);
    for name in [
        "DATABASE_URL",
        "APIGATE_API_KEY",
        "MCP_SERVER_API_KEY",
        "APIGATE_MONITOR_URL",
        "APIGATE_MONITOR_TIMEOUT",
        "APIGATE_MONITOR_LISTEN",
        "APIGATE_UPSTREAM_HEADERS",
        "APIGATE_EMBEDDING_MODEL",
        "APIGATE_CACHE_DIR",
        "APIGATE_INDEX",
        "APIGATE_SECRET_KEY",
        "APIGATE_SECRET_KEY_PREVIOUS",
    ] {
        command.env_remove(name);
    }
    for (name, value) in defaults.iter().chain(env) {
        if value.is_empty() {
            command.env_remove(name);
        } else {
            command.env(name, value);
        }
    }
    command
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `apigate ARGS` to its end (at most 60 s) with nothing from the test environment but
/// `env` (an empty value removes the variable) and apigate's own log filter; returns
/// (success, stdout, stderr).
pub async fn run_apigate(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = apigate_command(args, &[("RUST_LOG", "")], env);
    let out = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap_or_else(|_| panic!("apigate {args:?} did not finish within 60 s"))
        .expect("apigate runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `apigate dev` on `spec` (against `upstream` when given) with the test [`KEY`] on a fresh
/// port, `extra` arguments and `env` as [`Proc::spawn_with_env`] takes it; the process and
/// its MCP URL.
pub async fn spawn_dev(
    spec: &str,
    upstream: Option<&str>,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Proc, String) {
    let mut args = vec!["dev", "--spec", spec];
    if let Some(upstream) = upstream {
        args.extend(["--upstream", upstream]);
    }
    args.extend(["--api-key", KEY, "--listen", "127.0.0.1:0"]);
    args.extend(extra);
    Proc::spawn_with_env("dev", &args, env, "apigate dev:").await
}

/// The arguments of `apigate dev --config CONFIG` with the test [`KEY`] on a fresh port.
pub fn dev_config(config: &std::path::Path) -> [&str; 7] {
    let config = config.to_str().expect("a UTF-8 path");
    [
        "dev",
        "--config",
        config,
        "--api-key",
        KEY,
        "--listen",
        "127.0.0.1:0",
    ]
}

/// `apigate serve` on `spec` against `upstream` on a fresh port, with `extra` arguments and
/// `env` as [`Proc::spawn_with_env`] takes it; the process and its MCP URL.
pub async fn spawn_serve(
    spec: &str,
    upstream: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Proc, String) {
    let mut args = vec!["serve", "--spec", spec, "--upstream", upstream];
    args.extend(["--listen", "127.0.0.1:0"]);
    args.extend(extra);
    let (proc, url) = Proc::spawn_with_env("serve", &args, env, "apigate serve").await;
    // Whatever follows the URL on the banner line ("…/mcp; admin API at /admin/v1").
    (proc, url.trim_end_matches(';').to_string())
}

/// `apigate keys create --name NAME --features FEATURES --json` on the database at
/// `database_url`, which must succeed: the new key, as the command prints it.
pub async fn cli_key(database_url: &str, name: &str, features: &str) -> Value {
    let args = [
        "keys",
        "create",
        "--name",
        name,
        "--features",
        features,
        "--json",
    ];
    let (ok, out, err) = run_apigate(&args, &[("DATABASE_URL", database_url)]).await;
    assert!(ok, "apigate {args:?} failed:\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("apigate {args:?}: {e}\n{out}"))
}

/// The flags of a command line with their values, in order: `--flag value …`.
pub fn flags<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<&'a str> {
    pairs
        .iter()
        .flat_map(|(flag, value)| [*flag, *value])
        .collect()
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

/// The `format`s JSON Schema 2020-12 defines (its validation vocabulary, §7.3): written out
/// here from the specification, not taken from apigate.
pub const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Asserts that every `inputSchema` and `outputSchema` of `tools` (as an MCP client received
/// them) is a valid JSON Schema 2020-12 document and that every `format` keyword in it, at any
/// depth, is a standard one: what Claude Code and OpenCode (Ajv) read without a warning.
pub fn assert_clients_read_schemas(tools: &[rmcp::model::Tool]) {
    assert!(!tools.is_empty());
    for tool in tools {
        let mut schemas = vec![("inputSchema", Value::Object((*tool.input_schema).clone()))];
        match &tool.output_schema {
            Some(s) => schemas.push(("outputSchema", Value::Object((**s).clone()))),
            None => panic!("{} publishes no outputSchema", tool.name),
        }
        for (which, schema) in schemas {
            if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
                panic!("{} {which} is no JSON Schema 2020-12: {e}", tool.name);
            }
            let mut formats = Vec::new();
            schema_formats(&schema, "#", &mut formats);
            for (at, format) in formats {
                assert!(
                    format
                        .as_str()
                        .is_some_and(|f| STANDARD_FORMATS.contains(&f)),
                    "{} {which}: unknown format {format} at {at}",
                    tool.name
                );
            }
        }
    }
}

/// Every `format` keyword of `schema` and its subschemas, with where it is (a JSON pointer
/// like Ajv's `#/anyOf/0/properties/…`). Walks the keywords that hold subschemas (2020-12's
/// applicators and `$defs`), so a property named `format` is a name, not a keyword.
fn schema_formats(schema: &Value, at: &str, out: &mut Vec<(String, Value)>) {
    let Value::Object(map) = schema else {
        return;
    };
    if let Some(format) = map.get("format") {
        out.push((at.to_string(), format.clone()));
    }
    for (keyword, value) in map {
        let here = format!("{at}/{keyword}");
        match keyword.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    schema_formats(sub, &format!("{here}/{name}"), out);
                }
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                for (i, sub) in value.as_array().into_iter().flatten().enumerate() {
                    schema_formats(sub, &format!("{here}/{i}"), out);
                }
            }
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contentSchema" => schema_formats(value, &here, out),
            _ => {}
        }
    }
}

/// `expression` (JMESPath, as `select` takes it) evaluated on `data` by the reference crate:
/// how the task and paging tests compute the answers they expect.
pub fn search(expression: &str, data: &Value) -> Value {
    let compiled = jmespath::compile(expression)
        .unwrap_or_else(|e| panic!("{expression:?} is not JMESPath: {e}"));
    let found = compiled
        .search(jmespath::Variable::try_from(data).expect("JSON"))
        .unwrap_or_else(|e| panic!("{expression:?} failed: {e}"));
    serde_json::to_value(&*found).expect("JSON")
}
