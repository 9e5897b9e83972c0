//! Faults while apigate works: the database cut mid-load (`apigate serve` through a TCP proxy
//! the test cuts and restores, several MCP clients calling in a loop), an upstream that stalls
//! (no answer at all; headers, then a body that stops), and an agent monitor that flaps between
//! allowing, blocking, being down, too slow and failing. Every call must end (a tokio timeout
//! is the liveness guard, never a performance check) with a result or an error that names the
//! problem, the server must live on, and it must recover without a restart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};
use sqlx::Row;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::db::TestDb;
use crate::support::{
    CutProxy, KEY, Server, call, engine_args, execute_ok, mcp_client, spawn_dev, spawn_serve,
    spec_path,
};

/// The liveness guard on one tool call: far beyond any timeout configured here.
const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// Polls `done` until it holds, for at most a minute (then fails naming `what`).
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

// ---- an upstream that can hold, stall and drop ------------------------------------------------

/// The petstore's pet and user reads under `/v2`, where some user names misbehave: `held`
/// waits until the test releases it; `stall-head` never answers; `stall-body` sends its
/// headers and the start of a JSON body, then nothing more.
struct FaultyUpstream {
    addr: std::net::SocketAddr,
    state: Arc<FaultyState>,
}

struct FaultyState {
    release: watch::Sender<bool>,
    /// Requests for `held` received so far.
    held: AtomicUsize,
    /// Stalled requests received so far, and those whose connection is still open.
    stalled: AtomicUsize,
    stalled_open: AtomicUsize,
}

/// Counts a stalled request as open until hyper drops it, which it does when apigate closes
/// the connection.
struct OpenStall(Arc<FaultyState>);

impl OpenStall {
    fn new(state: &Arc<FaultyState>) -> OpenStall {
        state.stalled.fetch_add(1, Ordering::SeqCst);
        state.stalled_open.fetch_add(1, Ordering::SeqCst);
        OpenStall(state.clone())
    }
}

impl Drop for OpenStall {
    fn drop(&mut self) {
        self.0.stalled_open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl FaultyUpstream {
    async fn start() -> FaultyUpstream {
        let state = Arc::new(FaultyState {
            release: watch::channel(false).0,
            held: AtomicUsize::new(0),
            stalled: AtomicUsize::new(0),
            stalled_open: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(faulty).with_state(state.clone());
        let addr = crate::support::serve_app(app).await;
        FaultyUpstream { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn release_held(&self) {
        self.state.release.send_replace(true);
    }
}

async fn faulty(State(state): State<Arc<FaultyState>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    if let Some(id) = path.strip_prefix("/v2/pet/") {
        return axum::Json(json!({"id": id.parse::<i64>().unwrap_or(0), "name": "Rex",
            "status": "available", "photoUrls": []}))
        .into_response();
    }
    let Some(name) = path.strip_prefix("/v2/user/") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match name {
        "held" => {
            let mut released = state.release.subscribe();
            state.held.fetch_add(1, Ordering::SeqCst);
            let _ = released.wait_for(|r| *r).await;
            axum::Json(json!({"username": "held"})).into_response()
        }
        "stall-head" => {
            let _open = OpenStall::new(&state);
            std::future::pending::<Response>().await
        }
        "stall-body" => {
            let open = OpenStall::new(&state);
            let body = futures::stream::once(async {
                Ok::<_, std::io::Error>(Bytes::from_static(b"{\"username\": \"stall"))
            })
            .chain(futures::stream::pending())
            .map(move |chunk| {
                let _still_open = &open;
                chunk
            });
            (
                [(header::CONTENT_TYPE, "application/json")],
                Body::from_stream(body),
            )
                .into_response()
        }
        name => axum::Json(json!({"username": name})).into_response(),
    }
}

// ---- calls and what became of them ------------------------------------------------------------

/// How one tool call ended, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    /// A tool error with this code.
    Tool(String),
    /// The HTTP request failed (the transport's error text).
    Http(String),
}

impl Outcome {
    /// The `error_code` its audit row carries (`ok` for none); `None` when no tool ran.
    fn audit_code(&self) -> Option<String> {
        match self {
            Outcome::Ok => Some("ok".into()),
            Outcome::Tool(code) => Some(code.clone()),
            Outcome::Http(_) => None,
        }
    }
}

/// Calls `tool` and classifies the result; panics if it does not end within [`CALL_DEADLINE`].
async fn outcome(peer: &Peer<RoleClient>, tool: &str, args: Value) -> Outcome {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let call = peer.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map));
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Err(_) => panic!("a {tool} call did not end within {CALL_DEADLINE:?}"),
        Ok(Ok(r)) if r.is_error != Some(true) => Outcome::Ok,
        Ok(Ok(r)) => {
            let body = r.structured_content.unwrap_or(Value::Null);
            let code = body["code"].as_str().unwrap_or("<no code>").to_string();
            assert!(
                body["error"].as_str().is_some_and(|e| !e.is_empty()),
                "a tool error without a message: {body}"
            );
            Outcome::Tool(code)
        }
        Ok(Err(e)) => Outcome::Http(e.to_string()),
    }
}

/// One call a client made.
#[derive(Debug, Clone)]
struct Made {
    client: usize,
    tool: &'static str,
    outcome: Outcome,
}

/// Every call the clients made, in the order they ended.
#[derive(Default)]
struct CallLog(Mutex<Vec<Made>>);

impl CallLog {
    fn push(&self, client: usize, tool: &'static str, outcome: Outcome) {
        self.0.lock().unwrap().push(Made {
            client,
            tool,
            outcome,
        });
    }

    fn snapshot(&self) -> Vec<Made> {
        self.0.lock().unwrap().clone()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// How many calls of `client` succeeded among those that ended after the first `from`.
    fn successes(&self, from: usize, client: usize) -> usize {
        self.0.lock().unwrap()[from..]
            .iter()
            .filter(|m| m.client == client && m.outcome == Outcome::Ok)
            .count()
    }

    /// Whether a call that ended after the first `from` matches `f`.
    fn any_since(&self, from: usize, f: impl Fn(&Outcome) -> bool) -> bool {
        self.0.lock().unwrap()[from..].iter().any(|m| f(&m.outcome))
    }
}

/// Client `id` calling `api_discover` and `api_execute getPetById` in turn until `stop`;
/// returns how many calls it made.
async fn worker(
    id: usize,
    peer: Peer<RoleClient>,
    log: Arc<CallLog>,
    stop: CancellationToken,
) -> usize {
    let mut n = 0usize;
    while !stop.is_cancelled() {
        n += 1;
        let (tool, args) = if n.is_multiple_of(2) {
            ("api_discover", json!({"query": "find pets by status"}))
        } else {
            (
                "api_execute",
                json!({"operationId": "getPetById", "pathParams": {"petId": n}}),
            )
        };
        let o = outcome(&peer, tool, args).await;
        log.push(id, tool, o);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    n
}

async fn health(base: &str) -> (StatusCode, Value) {
    let r = tokio::time::timeout(CALL_DEADLINE, reqwest::get(format!("{base}/health")))
        .await
        .expect("/health answers")
        .unwrap();
    let status = StatusCode::from_u16(r.status().as_u16()).unwrap();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Polls `/health` until it answers `want` (at most a minute); returns its body.
async fn wait_for_health(base: &str, want: StatusCode) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = health(base).await;
        if status == want {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/health stays {status}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// audit_log's tool calls (not the admin actions that set the test up) grouped by (tool,
/// error_code or `ok`) → (decision, rows).
async fn audit_counts(database_url: &str) -> BTreeMap<(String, String), (String, i64)> {
    let pool = sqlx::PgPool::connect(database_url).await.unwrap();
    let rows = sqlx::query(
        "SELECT tool, COALESCE(error_code, 'ok') AS outcome, min(decision) AS decision, \
         count(DISTINCT decision) AS decisions, count(*) AS n FROM audit_log \
         WHERE tool <> 'admin' GROUP BY 1, 2",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows.iter()
        .map(|r| {
            assert_eq!(r.get::<i64, _>("decisions"), 1, "one decision per outcome");
            (
                (r.get("tool"), r.get("outcome")),
                (r.get("decision"), r.get("n")),
            )
        })
        .collect()
}

const BOOTSTRAP: &str = "bootstrap-key-for-the-fault-tests-0123456789";
/// The client id of calls made outside the loops.
const HOLDER: usize = usize::MAX;

/// How the database goes away.
#[derive(Debug, Clone, Copy)]
enum Outage {
    /// Connections are closed, new ones closed once accepted (the network drops them).
    Cut,
    /// Connections are closed and new ones refused (Postgres is down): every query then
    /// waits for the pool's 5 s acquire timeout.
    Refused,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_cut_mid_load_fails_cleanly_recovers_and_keeps_every_audit_row() {
    database_outage_under_load(Outage::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_refuses_connections_mid_load_fails_cleanly_and_recovers() {
    database_outage_under_load(Outage::Refused).await;
}

/// `apigate serve` against the database through a proxy the test cuts while four MCP clients
/// call in a loop (two authenticate with a server key from the database, two with the
/// bootstrap key, so both the HTTP and the tool-call refusals happen) and three calls are held
/// by the upstream across the cut.
async fn database_outage_under_load(outage: Outage) {
    let db = TestDb::new().await;
    let upstream = FaultyUpstream::start().await;
    let (proxy, proxied_url) = CutProxy::for_database(&db.url).await;
    let spec = spec_path("petstore-3.0.json");
    let upstream_url = upstream.url();
    let unlimited = ["--key-rate", "0", "--session-rate", "0"];
    let env = [
        ("DATABASE_URL", proxied_url.as_str()),
        ("MCP_SERVER_API_KEY", BOOTSTRAP),
    ];
    let (mut proc, mcp_url) = spawn_serve(&spec, &upstream_url, &unlimited, &env).await;
    let base = mcp_url.trim_end_matches("/mcp").to_string();

    // A server key and a user session, through the admin API.
    let create = |what: &'static str, body: Value, field: &'static str| {
        let url = format!("{base}/admin/v1/{what}");
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .header("x-api-key", BOOTSTRAP)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201);
            r.json::<Value>().await.unwrap()[field]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    let agent = json!({"name": "agent", "features": ["apigate.*"]});
    let key = create("keys", agent, "key").await;
    let user = json!({"userId": "u-1", "tenantId": "acme", "features": ["apigate.*"]});
    let token = create("sessions", user, "token").await;

    let log = Arc::new(CallLog::default());
    let stop = CancellationToken::new();
    let mut clients = Vec::new();
    let mut workers: Vec<JoinHandle<usize>> = Vec::new();
    const CLIENTS: usize = 4;
    for id in 0..CLIENTS {
        let k = if id % 2 == 0 { key.as_str() } else { BOOTSTRAP };
        let client = mcp_client(&mcp_url, &[("x-api-key", k), ("x-session-token", &token)]).await;
        workers.push(tokio::spawn(worker(
            id,
            client.peer().clone(),
            log.clone(),
            stop.clone(),
        )));
        clients.push(client);
    }
    let all_succeed_since = |from: usize| (0..CLIENTS).all(|id| log.successes(from, id) >= 3);
    wait_until("every client to succeed before the cut", || {
        all_succeed_since(0)
    })
    .await;

    // Three calls the upstream holds across the cut: they pass authentication now and
    // complete while the database is away.
    let holder = mcp_client(
        &mcp_url,
        &[("x-api-key", &key), ("x-session-token", &token)],
    )
    .await;
    let held: Vec<JoinHandle<Outcome>> = (0..3)
        .map(|_| {
            let peer = holder.peer().clone();
            tokio::spawn(async move {
                outcome(
                    &peer,
                    "api_execute",
                    json!({"operationId": "getUserByName", "pathParams": {"username": "held"}}),
                )
                .await
            })
        })
        .collect();
    wait_until("the upstream to hold three calls", || {
        upstream.state.held.load(Ordering::SeqCst) == 3
    })
    .await;

    match outage {
        Outage::Cut => proxy.cut(),
        Outage::Refused => proxy.refuse(),
    }
    let cut_at = log.len();
    let body = wait_for_health(&base, StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(body["database"], "unreachable", "{body}");
    // The held calls complete now, with the database away.
    upstream.release_held();
    for h in held {
        let o = h.await.expect("a held call's task");
        assert_eq!(o, Outcome::Ok, "a call the upstream held failed");
        log.push(HOLDER, "api_execute", o);
    }
    // Both refusals happen: the database key is refused before MCP (HTTP 503), the bootstrap
    // key's calls reach the tools and their session cannot be checked (UNAVAILABLE).
    wait_until("both kinds of refusal", || {
        log.any_since(cut_at, |o| *o == Outcome::Tool("UNAVAILABLE".into()))
            && log.any_since(cut_at, |o| matches!(o, Outcome::Http(_)))
    })
    .await;
    // The HTTP refusal names the problem.
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = http
        .post(&mcp_url)
        .header("x-api-key", &key)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "UNAVAILABLE", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("database"),
        "{body}"
    );

    proxy.restore();
    let restored_at = chrono::Utc::now();
    let body = wait_for_health(&base, StatusCode::OK).await;
    assert_eq!(body["database"], "ok", "{body}");
    let back_at = log.len();
    // Every client recovers, with no restart of anything: each of them succeeds again.
    wait_until("every client to succeed again", || {
        all_succeed_since(back_at)
    })
    .await;
    let fresh = mcp_client(
        &mcp_url,
        &[("x-api-key", &key), ("x-session-token", &token)],
    )
    .await;
    let o = outcome(&fresh, "api_discover", json!({"query": "pets"})).await;
    assert_eq!(o, Outcome::Ok);
    log.push(HOLDER, "api_discover", o);

    stop.cancel();
    for w in workers {
        w.await.expect("a client loop panicked");
    }
    for c in clients {
        c.cancel().await.unwrap();
    }
    holder.cancel().await.unwrap();
    fresh.cancel().await.unwrap();

    // Every call succeeded or failed with a reason: UNAVAILABLE from the tools, 503 over HTTP.
    let calls = log.snapshot();
    for m in &calls {
        match &m.outcome {
            Outcome::Ok => {}
            Outcome::Tool(code) => assert_eq!(code, "UNAVAILABLE", "{m:?}"),
            Outcome::Http(e) => assert!(e.contains("HTTP 503"), "{m:?}"),
        }
    }
    assert!(proc.is_running(), "apigate serve died\n{}", proc.log());
    assert!(
        !proc.stderr().contains("panicked"),
        "apigate serve panicked\n{}",
        proc.log()
    );

    // Every call that reached the tools has its audit row (those refused with 503 never
    // reached them), including the ones that completed while the database was away.
    let mut expected: BTreeMap<(String, String), (String, i64)> = BTreeMap::new();
    for m in &calls {
        if let Some(code) = m.outcome.audit_code() {
            let decision = if code == "ok" { "allowed" } else { "failed" };
            expected
                .entry((m.tool.to_string(), code))
                .or_insert((decision.to_string(), 0))
                .1 += 1;
        }
    }
    let mut last = BTreeMap::new();
    let settled = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            last = audit_counts(&db.url).await;
            if last == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    if settled.is_err() {
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        let twins: Vec<String> = sqlx::query(
            "SELECT tool || ' at ' || at::text || ' x' || count(*)::text AS t FROM audit_log \
             GROUP BY tool, at, duration_ms HAVING count(*) > 1",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get("t"))
        .collect();
        panic!(
            "audit rows per (tool, outcome) differ from the calls made:\n calls: {expected:?}\n audit: {last:?}\n rows written twice: {twins:?}\n{}",
            proc.log()
        );
    }
    // The rows of the held calls carry the time of the call, not of the late write.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let held_rows = sqlx::query(
        "SELECT count(*) AS n FROM audit_log WHERE operation = 'getUserByName' \
         AND decision = 'allowed' AND upstream_status = 200 AND at < $1 AND call_id IS NOT NULL",
    )
    .bind(restored_at)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(held_rows.get::<i64, _>("n"), 3);
    pool.close().await;
    assert!(proc.terminate().await, "{}", proc.log());
}

// ---- a stalled upstream -----------------------------------------------------------------------

/// Two calls whose upstream never answers and two whose body stops after the headers, with
/// a 1-second upstream timeout: they end with UPSTREAM_TIMEOUT while calls to a healthy
/// operation succeed meanwhile, and every stalled connection is closed afterwards.
#[tokio::test]
async fn a_stalled_upstream_times_out_while_other_calls_go_on() {
    let upstream = FaultyUpstream::start().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.upstream_timeout = Duration::from_secs(1);
    let server = Server::start(args, false).await;
    let client = server.client().await;
    let stalled: Vec<JoinHandle<(bool, Value)>> = ["stall-head", "stall-body"]
        .iter()
        .flat_map(|name| [*name, *name])
        .map(|name| {
            let peer = client.peer().clone();
            tokio::spawn(async move {
                let execute =
                    json!({"operationId": "getUserByName", "pathParams": {"username": name}});
                tokio::time::timeout(CALL_DEADLINE, call(&peer, "api_execute", execute))
                    .await
                    .unwrap_or_else(|_| panic!("a call to {name} never ended"))
            })
        })
        .collect();
    wait_until("the upstream to hold the four stalled calls", || {
        upstream.state.stalled.load(Ordering::SeqCst) == 4
    })
    .await;

    // While they stall, other calls go through (three at a time).
    for round in 0..4 {
        let healthy: Vec<_> = (0..3)
            .map(|i| {
                let peer = client.peer().clone();
                let id = round * 10 + i;
                tokio::spawn(async move {
                    let execute = json!({"operationId": "getPetById", "pathParams": {"petId": id}});
                    let r =
                        tokio::time::timeout(CALL_DEADLINE, call(&peer, "api_execute", execute))
                            .await
                            .expect("a healthy call ends");
                    (id, r)
                })
            })
            .collect();
        for h in healthy {
            let (id, (err, r)) = h.await.unwrap();
            assert!(!err, "a healthy call failed beside the stalled ones: {r}");
            assert_eq!(r["body"]["id"], id, "{r}");
        }
    }

    for h in stalled {
        let (err, r) = h.await.unwrap();
        assert!(err, "a stalled call succeeded: {r}");
        assert_eq!(r["code"], "UPSTREAM_TIMEOUT", "{r}");
        assert!(
            r["error"].as_str().unwrap().contains("1000 ms"),
            "the message names the timeout: {r}"
        );
    }
    // apigate hung up on every stalled request: the upstream saw each connection close.
    wait_until("the stalled connections to close", || {
        upstream.state.stalled_open.load(Ordering::SeqCst) == 0
    })
    .await;
    assert_eq!(upstream.state.stalled.load(Ordering::SeqCst), 4);
    // And the server carries on.
    execute_ok(
        &client,
        json!({"operationId": "getPetById", "pathParams": {"petId": 7}}),
    )
    .await;
    client.cancel().await.unwrap();
}

// ---- a flapping monitor -----------------------------------------------------------------------

/// What the monitor does at the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Answers `{"block": false}`.
    Allow,
    /// Answers `{"block": true}`.
    Deny,
    /// Its port is closed.
    Down,
    /// Accepts every request and never answers.
    Slow,
    /// Answers 500.
    Failing,
}

impl Mode {
    /// The `monitor` detail of the BLOCKED_BY_MONITOR error this mode causes.
    fn cause(self) -> Option<&'static str> {
        match self {
            Mode::Allow => None,
            Mode::Deny => Some("monitor"),
            Mode::Down => Some("unreachable"),
            Mode::Slow => Some("timeout"),
            Mode::Failing => Some("http_status"),
        }
    }
}

/// An agent monitor on a fixed port that can be switched between [`Mode`]s, counting the
/// requests it holds open.
struct FlappingMonitor {
    port: u16,
    shared: Arc<MonitorShared>,
    running: Option<(CancellationToken, JoinHandle<()>)>,
}

struct MonitorShared {
    mode: Mutex<Mode>,
    open: AtomicUsize,
    decisions: AtomicUsize,
}

struct OpenRequest(Arc<MonitorShared>);

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn monitor_event(State(shared): State<Arc<MonitorShared>>, body: String) -> Response {
    shared.open.fetch_add(1, Ordering::SeqCst);
    let _open = OpenRequest(shared.clone());
    let mode = *shared.mode.lock().unwrap();
    let is_pre =
        serde_json::from_str::<Value>(&body).is_ok_and(|e| e["type"] == "tool.pre_execute");
    if is_pre {
        shared.decisions.fetch_add(1, Ordering::SeqCst);
    }
    match mode {
        Mode::Slow => std::future::pending::<Response>().await,
        Mode::Failing => (StatusCode::INTERNAL_SERVER_ERROR, "monitor failure").into_response(),
        Mode::Deny if is_pre => {
            axum::Json(json!({"block": true, "reason": "the flapping monitor says no"}))
                .into_response()
        }
        _ => axum::Json(json!({"block": false})).into_response(),
    }
}

impl FlappingMonitor {
    async fn start() -> FlappingMonitor {
        let port = crate::support::free_port();
        let mut m = FlappingMonitor {
            port,
            shared: Arc::new(MonitorShared {
                mode: Mutex::new(Mode::Allow),
                open: AtomicUsize::new(0),
                decisions: AtomicUsize::new(0),
            }),
            running: None,
        };
        m.set(Mode::Allow).await;
        m
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn set(&mut self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
        match (mode, self.running.is_some()) {
            (Mode::Down, true) => {
                let (stop, task) = self.running.take().unwrap();
                stop.cancel();
                // Graceful: idle connections are closed, open ones end when apigate drops them.
                tokio::time::timeout(CALL_DEADLINE, task)
                    .await
                    .expect("the monitor stops (a request held open?)")
                    .unwrap();
            }
            (Mode::Down, false) | (_, true) => {}
            (_, false) => {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
                    .await
                    .unwrap_or_else(|e| panic!("cannot listen again on {}: {e}", self.port));
                let app = Router::new()
                    .route("/agent-monitor", axum::routing::post(monitor_event))
                    .with_state(self.shared.clone());
                let stop = CancellationToken::new();
                let signal = stop.clone().cancelled_owned();
                let task = tokio::spawn(async move {
                    axum::serve(listener, app)
                        .with_graceful_shutdown(signal)
                        .await
                        .unwrap();
                });
                self.running = Some((stop, task));
            }
        }
    }
}

/// The sum of `apigate_tool_calls_total` samples with this outcome.
fn tool_calls(metrics: &str, outcome: &str) -> f64 {
    let label = format!("outcome=\"{outcome}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("apigate_tool_calls_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `apigate dev --monitor` (500 ms gate timeout) before a monitor that flaps between allowing,
/// blocking, a closed port, never answering and answering 500: each call is allowed exactly
/// when the monitor is up and allows it, and otherwise blocked with the cause named; no call
/// hangs, nothing sticks after the monitor comes back, and nothing is left waiting on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_monitor_blocks_exactly_when_it_does_not_allow() {
    let upstream = FaultyUpstream::start().await;
    let mut monitor = FlappingMonitor::start().await;
    let spec = spec_path("petstore-3.0.json");
    let (upstream_url, monitor_url) = (upstream.url(), monitor.url());
    let gate = ["--monitor", &monitor_url, "--monitor-timeout", "500ms"];
    let (mut proc, url) = spawn_dev(&spec, Some(&upstream_url), &gate, &[]).await;
    let base = url.trim_end_matches("/mcp").to_string();
    wait_for_health(&base, StatusCode::OK).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;

    use Mode::*;
    let series = [
        Allow, Down, Allow, Slow, Allow, Failing, Deny, Allow, Down, Slow, Failing, Allow, Deny,
        Slow, Down, Allow,
    ];
    let (mut allowed, mut blocked) = (0, 0);
    for (step, mode) in series.into_iter().enumerate() {
        monitor.set(mode).await;
        for round in 0..2 {
            let (tool, args) = if round == 0 {
                (
                    "api_execute",
                    json!({"operationId": "getPetById", "pathParams": {"petId": step}}),
                )
            } else {
                ("api_discover", json!({"query": "find pets by status"}))
            };
            let (err, r) = tokio::time::timeout(CALL_DEADLINE, call(&client, tool, args))
                .await
                .unwrap_or_else(|_| panic!("step {step} ({mode:?}): {tool} hung"));
            match mode.cause() {
                None => {
                    assert!(!err, "step {step} ({mode:?}): {tool} was blocked: {r}");
                    allowed += 1;
                }
                Some(cause) => {
                    assert!(err, "step {step} ({mode:?}): {tool} ran: {r}");
                    assert_eq!(r["code"], "BLOCKED_BY_MONITOR", "step {step}: {r}");
                    assert_eq!(r["monitor"], cause, "step {step} ({mode:?}): {r}");
                    blocked += 1;
                }
            }
        }
    }
    // Nothing waits on the monitor any more: apigate let go of every request it held open.
    wait_until("apigate to let go of the monitor", || {
        monitor.shared.open.load(Ordering::SeqCst) == 0
    })
    .await;
    // Every call is counted once, under the outcome it had, and the server still answers.
    let metrics = crate::support::metrics(&base).await;
    assert_eq!(tool_calls(&metrics, "ok"), f64::from(allowed), "{metrics}");
    assert_eq!(
        tool_calls(&metrics, "BLOCKED_BY_MONITOR"),
        f64::from(blocked),
        "{metrics}"
    );
    assert_eq!(health(&base).await.0, StatusCode::OK);
    client.cancel().await.unwrap();
    assert!(proc.is_running(), "{}", proc.log());
    assert!(!proc.stderr().contains("panicked"), "{}", proc.log());
    assert!(proc.terminate().await, "{}", proc.log());
}
