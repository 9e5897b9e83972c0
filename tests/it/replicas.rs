//! Replicas that behave as one (issue 44): three real `apigate serve` processes on one
//! throwaway Postgres, the same spec and a real upstream, behind a real HAProxy (Debian's
//! `haproxy`, configured by the test in a temporary folder: round robin, health checks,
//! `retry-on conn-failure empty-response`, `option redispatch`, `retries 3`). Each row sends
//! its traffic through the balancer, or to each replica directly, over plain HTTP JSON-RPC:
//!
//! - a key's rate limit and a session's rate limit hold across the replicas (at most 1.1 times
//!   the limit is accepted when three times the limit is sent);
//! - `--max-sessions-per-key` holds across stateful replicas (the balancer sticks each MCP
//!   session to the replica that opened it);
//! - a key revoked with the CLI is refused by every replica within 2 s;
//! - a binary response held by one replica is read through the others;
//! - a replica killed with SIGKILL under load, or stopped with SIGTERM while a slow call runs
//!   on it, fails no request (HAProxy retries what never reached a replica; a draining replica
//!   finishes what it took), and SIGTERM ends the process with status 0 within the drain
//!   timeout.
//!
//! Without HAProxy the tests fail and say how to install it.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header;
use axum::response::IntoResponse;
use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::binary_out::noise;
use crate::db::TestDb;
use crate::support::{
    Proc, Upstream, cli_key, free_port, poll, run_apigate, serve_app, spawn_serve, spec_path,
};

/// The path HAProxy checks on each replica: 503 while it drains or its database does not
/// answer.
const CHECK_PATH: &str = "/ready";

/// `--drain-timeout` of the SIGTERM row: how long a replica may take to finish its calls in
/// flight after SIGTERM (the server's default is 25 s).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

const REPLICAS: usize = 3;

/// The features of the test's key and sessions.
const FEATURES: &str = "apigate.*";

/// Where HAProxy is: `HAPROXY`, else `haproxy` on the PATH or in /usr/sbin (Debian's package
/// puts it there, outside a user's PATH). Fails with the install command when there is none.
fn find_haproxy() -> PathBuf {
    if let Some(p) = std::env::var_os("HAPROXY") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain([PathBuf::from("/usr/sbin")]);
    for dir in dirs {
        let candidate = dir.join("haproxy");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "the replica tests need HAProxy, which was not found in PATH or /usr/sbin. Install it \
         with `apt-get update && apt-get install -y haproxy` (Debian/Ubuntu), or point \
         HAPROXY=/path/to/haproxy at a HAProxy binary."
    );
}

/// How the balancer picks a replica.
#[derive(Clone, Copy)]
enum Balance {
    /// Any replica for any request (stateless replicas).
    RoundRobin,
    /// Round robin for `initialize`, then the replica that answered it for every request
    /// carrying the `Mcp-Session-Id` it returned (stateful replicas).
    StickyMcpSession,
}

/// A running HAProxy in front of the replicas, with its stats page on another port.
struct Balancer {
    child: Child,
    port: u16,
    stats_port: u16,
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Balancer {
    async fn start(replicas: &[u16], balance: Balance) -> Balancer {
        let haproxy = find_haproxy();
        let (port, stats_port) = (free_port(), free_port());
        let balance = match balance {
            Balance::RoundRobin => "balance roundrobin".to_string(),
            Balance::StickyMcpSession => "balance roundrobin\n    \
                 stick-table type string len 64 size 10k expire 30m\n    \
                 stick on req.hdr(mcp-session-id)\n    \
                 stick store-response res.hdr(mcp-session-id)"
                .to_string(),
        };
        let servers: String = replicas
            .iter()
            .enumerate()
            .map(|(i, p)| format!("    server r{} 127.0.0.1:{p} check\n", i + 1))
            .collect();
        let config = format!(
            "global\n    \
                 maxconn 2000\n    \
                 log stderr format raw local0 info\n\
             defaults\n    \
                 mode http\n    \
                 log global\n    \
                 option httplog\n    \
                 timeout connect 2s\n    \
                 timeout client 120s\n    \
                 timeout server 120s\n    \
                 timeout check 2s\n    \
                 retries 3\n    \
                 option redispatch\n    \
                 retry-on conn-failure empty-response\n    \
                 default-server inter 300ms fall 2 rise 2\n\
             frontend mcp\n    \
                 bind 127.0.0.1:{port}\n    \
                 default_backend replicas\n\
             backend replicas\n    \
                 {balance}\n    \
                 option httpchk\n    \
                 http-check send meth GET uri {CHECK_PATH} ver HTTP/1.1 hdr Host 127.0.0.1\n    \
                 http-check expect status 200\n\
             {servers}\
             listen stats\n    \
                 bind 127.0.0.1:{stats_port}\n    \
                 stats enable\n    \
                 stats uri /stats\n"
        );
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, &config).expect("writing the HAProxy configuration");
        let mut child = Command::new(&haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", haproxy.display()));
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let sink = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let mut balancer = Balancer {
            child,
            port,
            stats_port,
            log,
            _dir: dir,
        };
        let every = Duration::from_millis(100);
        poll(
            "HAProxy does not see every replica UP",
            Duration::from_secs(60),
            every,
            || {
                let up = balancer.servers();
                async move {
                    let up = up.await;
                    (up.len() == replicas.len() && up.iter().all(|(_, s)| s == "UP")).then_some(())
                }
            },
        )
        .await;
        assert!(
            balancer.child.try_wait().ok().flatten().is_none(),
            "HAProxy exited:\n{}",
            balancer.log()
        );
        balancer
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Each server of the backend and its status as HAProxy's stats say it (`UP`, `DOWN`,
    /// `UP 1/2`, …); empty while the stats page does not answer.
    fn servers(&self) -> impl std::future::Future<Output = Vec<(String, String)>> + 'static {
        let url = format!("http://127.0.0.1:{}/stats;csv", self.stats_port);
        async move {
            let Ok(answer) = reqwest::get(&url).await else {
                return Vec::new();
            };
            let text = answer.text().await.unwrap_or_default();
            let mut lines = text.lines();
            let header: Vec<&str> = lines
                .next()
                .unwrap_or_default()
                .trim_start_matches("# ")
                .split(',')
                .collect();
            let column = |name: &str| header.iter().position(|h| *h == name);
            let (Some(px), Some(sv), Some(status)) =
                (column("pxname"), column("svname"), column("status"))
            else {
                return Vec::new();
            };
            lines
                .map(|l| l.split(',').collect::<Vec<_>>())
                .filter(|f| f.get(px) == Some(&"replicas"))
                .filter(|f| !matches!(f.get(sv), Some(&"FRONTEND" | &"BACKEND")))
                .filter_map(|f| Some((f.get(sv)?.to_string(), f.get(status)?.to_string())))
                .collect()
        }
    }

    /// How many times HAProxy retried a request on a replica and sent one to another
    /// replica than first chosen (the backend's `wretr` and `wredis`).
    async fn retries(&self) -> (String, String) {
        let url = format!("http://127.0.0.1:{}/stats;csv", self.stats_port);
        let text = match reqwest::get(&url).await {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let backend = lines
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f.first() == Some(&"replicas") && f.get(1) == Some(&"BACKEND"))
            .unwrap_or_default();
        let field = |name: &str| {
            let at = header.iter().position(|h| *h == name);
            at.and_then(|i| backend.get(i)).unwrap_or(&"?").to_string()
        };
        (field("wretr"), field("wredis"))
    }

    /// Waits until HAProxy has taken server `name` out (`DOWN`, or in maintenance).
    async fn wait_down(&self, name: &str) {
        let what = format!("HAProxy still sends requests to {name}");
        poll(
            &what,
            Duration::from_secs(60),
            Duration::from_millis(100),
            || {
                let servers = self.servers();
                async move {
                    let servers = servers.await;
                    let status = servers.iter().find(|(n, _)| n == name).map(|(_, s)| s);
                    status
                        .filter(|s| s.starts_with("DOWN") || s.starts_with("MAINT"))
                        .map(|_| ())
                }
            },
        )
        .await
    }

    fn log(&self) -> String {
        format!("--- haproxy ---\n{}", self.log.lock().unwrap().join("\n"))
    }
}

/// One `apigate serve` replica.
struct Replica {
    proc: Proc,
    port: u16,
}

impl Replica {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// The database, the replicas and the balancer of one row, and a key and a session made with
/// the CLI before the replicas started.
struct Cluster {
    // Dropped in this order: the balancer, the replicas, then the database.
    lb: Balancer,
    replicas: Vec<Replica>,
    key: String,
    key_id: String,
    token: String,
    db: TestDb,
}

impl Cluster {
    /// Three replicas of `apigate serve --spec SPEC --upstream UPSTREAM FLAGS…` behind HAProxy.
    async fn start(spec: &str, upstream: &str, flags: &[&str], balance: Balance) -> Cluster {
        let db = TestDb::new().await;
        let created = cli_key(&db.url, "agent", FEATURES).await;
        let key = created["key"].as_str().expect("the new key").to_string();
        let key_id = created["id"]
            .as_str()
            .expect("the new key's id")
            .to_string();
        let token = session(&db.url, "u-1").await;
        let env = [("DATABASE_URL", db.url.as_str())];
        let spawned = (0..REPLICAS).map(|_| spawn_serve(spec, upstream, flags, &env));
        let mut replicas = Vec::new();
        for (proc, mcp_url) in futures::future::join_all(spawned).await {
            let port = url::Url::parse(&mcp_url)
                .ok()
                .and_then(|u| u.port())
                .unwrap_or_else(|| panic!("no port in {mcp_url}"));
            replicas.push(Replica { proc, port });
        }
        let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
        let lb = Balancer::start(&ports, balance).await;
        Cluster {
            lb,
            replicas,
            key,
            key_id,
            token,
            db,
        }
    }

    /// The logs of the balancer and of every replica, for a failure message.
    fn logs(&self) -> String {
        let mut all = vec![self.lb.log()];
        all.extend(self.replicas.iter().map(|r| r.proc.log()));
        all.join("\n")
    }

    /// The headers of the test's key and session.
    fn credentials(&self) -> [(&str, &str); 2] {
        [
            ("x-api-key", self.key.as_str()),
            ("x-session-token", self.token.as_str()),
        ]
    }
}

/// `apigate sessions create --user USER --features FEATURES --json`: the new session's token.
async fn session(database_url: &str, user: &str) -> String {
    let args = [
        "sessions",
        "create",
        "--user",
        user,
        "--features",
        FEATURES,
        "--json",
    ];
    let (ok, out, err) = run_apigate(&args, &[("DATABASE_URL", database_url)]).await;
    assert!(ok, "apigate {args:?} failed:\n{err}");
    let created: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("apigate {args:?}: {e}\n{out}"));
    created["token"].as_str().expect("a token").to_string()
}

/// What one JSON-RPC POST to `/mcp` got back.
struct Answer {
    status: StatusCode,
    /// The `Mcp-Session-Id` header of the answer.
    session: Option<String>,
    /// The JSON-RPC message (from a JSON body or an SSE `data:` line); `Null` when there is
    /// none.
    message: Value,
    text: String,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.text)
    }
}

/// POSTs one JSON-RPC `message` to the MCP endpoint `url` with `headers`.
async fn post(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    message: &Value,
) -> Result<Answer, reqwest::Error> {
    let mut request = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(message);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer = request.send().await?;
    let status = answer.status();
    let session = answer
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = answer.text().await?;
    Ok(Answer {
        status,
        session,
        message: rpc_message(&text),
        text,
    })
}

/// The JSON-RPC message of an answer's body: the body itself when it is JSON, else the last
/// SSE `data:` line that is a JSON-RPC message.
fn rpc_message(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return value;
    }
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("jsonrpc").is_some())
        .unwrap_or(Value::Null)
}

fn tool_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

/// How a tool call ended.
enum Outcome {
    /// The tool ran: its structured content.
    Ran(Value),
    /// Refused by a rate limit (HTTP 429, or the tool error `RATE_LIMITED`).
    Limited,
    /// Anything else, described.
    Failed(String),
}

fn outcome(answer: &Answer) -> Outcome {
    if answer.status == StatusCode::TOO_MANY_REQUESTS {
        return Outcome::Limited;
    }
    let result = &answer.message["result"];
    if answer.status != StatusCode::OK || !result.is_object() {
        return Outcome::Failed(answer.to_string());
    }
    let content = &result["structuredContent"];
    match (result["isError"] == true, content["code"] == "RATE_LIMITED") {
        (false, _) => Outcome::Ran(content.clone()),
        (true, true) => Outcome::Limited,
        (true, false) => Outcome::Failed(answer.to_string()),
    }
}

/// Sends `calls` discovers one after the other through the balancer; (accepted, limited,
/// seconds it took). Any other answer fails the test.
async fn discover_through(cluster: &Cluster, calls: usize) -> (usize, usize, f64) {
    let http = reqwest::Client::new();
    let url = cluster.lb.url("/mcp");
    let credentials = cluster.credentials();
    let (mut accepted, mut limited) = (0, 0);
    let started = Instant::now();
    for i in 0..calls {
        let call = tool_call(i as u64 + 1, "api_discover", json!({"query": "find pets"}));
        let answer = post(&http, &url, &credentials, &call)
            .await
            .unwrap_or_else(|e| panic!("call {i} through the balancer: {e}\n{}", cluster.logs()));
        match outcome(&answer) {
            Outcome::Ran(_) => accepted += 1,
            Outcome::Limited => limited += 1,
            Outcome::Failed(what) => panic!("call {i}: {what}\n{}", cluster.logs()),
        }
    }
    (accepted, limited, started.elapsed().as_secs_f64())
}

/// Asserts that of `sent` calls a limit of `limit` calls a minute accepted at most 1.1 times
/// what one bucket allows in `seconds` (its burst and what refills meanwhile), and at least
/// 0.9 times its burst.
#[track_caller]
fn assert_limit_holds(what: &str, limit: usize, (accepted, limited, seconds): (usize, usize, f64)) {
    let refilled = limit as f64 / 60.0 * seconds;
    let allowed = 1.1 * (limit as f64 + refilled);
    let summary = format!(
        "{what}: {accepted} of {} calls accepted ({limited} rate-limited) in {seconds:.1} s with \
         a limit of {limit} a minute across {REPLICAS} replicas (at most {allowed:.1} allowed)",
        accepted + limited
    );
    eprintln!("{summary}");
    assert!(accepted as f64 <= allowed, "{summary}");
    assert!(accepted as f64 >= 0.9 * limit as f64, "too few: {summary}");
}

/// `limit` calls a minute by the `limited` pair of flags (`--key-rate`/`--key-burst` or the
/// session's), the other kind of limit `off`: 3 × `limit` calls through the balancer.
async fn limit_holds_across_replicas(what: &str, limit: usize, limited: &str, off: &str) {
    let upstream = Upstream::start().await;
    let rate = format!("{}", limit as f64 / 60.0);
    let burst = limit.to_string();
    let (rate_flag, burst_flag) = (format!("--{limited}-rate"), format!("--{limited}-burst"));
    let off_flag = format!("--{off}-rate");
    let flags = [
        "--stateless",
        &rate_flag,
        &rate,
        &burst_flag,
        &burst,
        &off_flag,
        "0",
    ];
    let spec = spec_path("petstore-3.0.json");
    let cluster = Cluster::start(&spec, &upstream.url(), &flags, Balance::RoundRobin).await;
    let counted = discover_through(&cluster, 3 * limit).await;
    assert_limit_holds(what, limit, counted);
}

#[tokio::test]
async fn a_key_rate_limit_holds_across_replicas() {
    limit_holds_across_replicas("a key", 30, "key", "session").await;
}

#[tokio::test]
async fn a_session_rate_limit_holds_across_replicas() {
    limit_holds_across_replicas("a session", 20, "session", "key").await;
}

#[tokio::test]
async fn the_mcp_session_cap_per_key_holds_across_replicas() {
    const K: usize = 2;
    let upstream = Upstream::start().await;
    let cap = K.to_string();
    let flags = ["--max-sessions-per-key", &cap];
    let spec = spec_path("petstore-3.0.json");
    let cluster = Cluster::start(&spec, &upstream.url(), &flags, Balance::StickyMcpSession).await;
    let http = reqwest::Client::new();
    let url = cluster.lb.url("/mcp");
    let credentials = cluster.credentials();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "replicas-test", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (mut opened, mut refused) = (0, 0);
    for i in 0..K + 2 {
        let answer = post(&http, &url, &credentials, &initialize).await.unwrap();
        if answer.status == StatusCode::TOO_MANY_REQUESTS {
            refused += 1;
            continue;
        }
        let Some(id) = answer.session.clone().filter(|_| answer.status == 200) else {
            panic!("initialize {i}: {answer}\n{}", cluster.logs());
        };
        opened += 1;
        // The balancer sends the session's requests to the replica that opened it: the
        // session works through it.
        let mut headers = credentials.to_vec();
        headers.push(("mcp-session-id", id.as_str()));
        let answer = post(&http, &url, &headers, &initialized).await.unwrap();
        assert!(answer.status.is_success(), "initialized {i}: {answer}");
        let call = tool_call(2, "api_discover", json!({"query": "find pets"}));
        let answer = post(&http, &url, &headers, &call).await.unwrap();
        let Outcome::Ran(_) = outcome(&answer) else {
            panic!("a call in session {i}: {answer}\n{}", cluster.logs());
        };
    }
    let summary = format!(
        "{opened} of {} MCP sessions opened ({refused} refused with 429) with \
         --max-sessions-per-key {K} across {REPLICAS} replicas",
        K + 2
    );
    eprintln!("{summary}");
    assert!(opened <= K, "{summary}");
    assert_eq!(opened, K, "{summary}");
}

#[tokio::test]
async fn a_key_revoked_with_the_cli_is_refused_by_every_replica_within_2_s() {
    let upstream = Upstream::start().await;
    let spec = spec_path("petstore-3.0.json");
    let flags = ["--stateless"];
    let cluster = Cluster::start(&spec, &upstream.url(), &flags, Balance::RoundRobin).await;
    let http = reqwest::Client::new();
    let credentials = cluster.credentials();
    let call = tool_call(1, "api_discover", json!({"query": "find pets"}));
    // Every replica has verified (and cached) the key.
    for (i, replica) in cluster.replicas.iter().enumerate() {
        let answer = post(&http, &replica.url("/mcp"), &credentials, &call)
            .await
            .unwrap();
        let Outcome::Ran(_) = outcome(&answer) else {
            panic!("replica {}: {answer}", i + 1);
        };
    }
    let revoke = ["keys", "revoke", cluster.key_id.as_str()];
    let (ok, _, err) = run_apigate(&revoke, &[("DATABASE_URL", &cluster.db.url)]).await;
    assert!(ok, "apigate {revoke:?} failed:\n{err}");
    for (i, replica) in cluster.replicas.iter().enumerate() {
        let what = format!("replica {} still accepts the revoked key", i + 1);
        let answer = poll(
            &what,
            Duration::from_secs(2),
            Duration::from_millis(50),
            || async {
                let answer = post(&http, &replica.url("/mcp"), &credentials, &call)
                    .await
                    .unwrap();
                (answer.status == StatusCode::UNAUTHORIZED).then_some(answer)
            },
        )
        .await;
        assert_eq!(answer.message["code"], "UNAUTHORIZED", "{answer}");
    }
    let answer = post(&http, &cluster.lb.url("/mcp"), &credentials, &call)
        .await
        .unwrap();
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{answer}");
}

#[tokio::test]
async fn a_response_held_by_one_replica_is_read_through_the_others() {
    // `tests/data/specs/downloads.json`'s archives: 100 KB of zip bytes each.
    let zip = noise(100 * 1024, 44);
    let bytes = zip.clone();
    let app = axum::Router::new().route(
        "/v1/archives/{name}",
        axum::routing::get(move || {
            let bytes = bytes.clone();
            async move { ([(header::CONTENT_TYPE, "application/zip")], bytes).into_response() }
        }),
    );
    let upstream = format!("http://{}", serve_app(app).await);
    let spec = spec_path("downloads.json");
    let flags = ["--stateless"];
    let cluster = Cluster::start(&spec, &upstream, &flags, Balance::RoundRobin).await;
    let http = reqwest::Client::new();
    let credentials = cluster.credentials();
    let download = json!({"operationId": "downloadArchive", "pathParams": {"name": "a"}});
    let call = tool_call(1, "api_execute", download);
    let answer = post(&http, &cluster.replicas[0].url("/mcp"), &credentials, &call)
        .await
        .unwrap();
    let Outcome::Ran(result) = outcome(&answer) else {
        panic!("the download through replica 1: {answer}");
    };
    let uri = result["body"]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("no uri: {result}"));
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
        "params": {"uri": uri}});
    let others = cluster.replicas[1..].iter().map(|r| r.url("/mcp"));
    for url in others.chain([cluster.lb.url("/mcp")]) {
        let answer = post(&http, &url, &credentials, &read).await.unwrap();
        let blob = answer.message["result"]["contents"][0]["blob"].as_str();
        let blob = blob.unwrap_or_else(|| panic!("{url}: no blob in {answer}"));
        let got = base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap_or_else(|e| panic!("{url}: the blob is not base64: {e}"));
        assert!(
            got == zip,
            "{url}: {} bytes read, not the {} held",
            got.len(),
            zip.len()
        );
    }
}

/// Discovers and schemas sent through the balancer by a few concurrent clients until told to
/// stop; counts what ran and keeps what failed.
struct Load {
    ran: Arc<AtomicUsize>,
    failed: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    const CLIENTS: usize = 4;

    fn start(cluster: &Cluster) -> Load {
        let ran = Arc::new(AtomicUsize::new(0));
        let failed: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let url = cluster.lb.url("/mcp");
        let workers = (0..Load::CLIENTS)
            .map(|w| {
                let (ran, failed, stop) = (ran.clone(), failed.clone(), stop.clone());
                let (url, key, token) = (url.clone(), cluster.key.clone(), cluster.token.clone());
                tokio::spawn(async move {
                    let http = reqwest::Client::builder()
                        .timeout(Duration::from_secs(90))
                        .build()
                        .expect("an HTTP client");
                    let headers = [("x-api-key", key.as_str()), ("x-session-token", &token)];
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let call = if n.is_multiple_of(2) {
                            let query = format!("find pets by status {w} {n}");
                            tool_call(n, "api_discover", json!({"query": query}))
                        } else {
                            tool_call(n, "api_schema", json!({"operationId": "getPetById"}))
                        };
                        match post(&http, &url, &headers, &call).await {
                            Ok(answer) => match outcome(&answer) {
                                Outcome::Ran(_) => {
                                    ran.fetch_add(1, Ordering::SeqCst);
                                }
                                _ => failed.lock().unwrap().push(answer.to_string()),
                            },
                            Err(e) => failed.lock().unwrap().push(format!("{e:#}")),
                        }
                    }
                })
            })
            .collect();
        Load {
            ran,
            failed,
            stop,
            workers,
        }
    }

    /// Waits until `more` calls have run since now.
    async fn run_more(&self, more: usize) {
        let target = self.ran.load(Ordering::SeqCst) + more;
        let what = format!("fewer than {more} more calls ran");
        poll(
            &what,
            Duration::from_secs(120),
            Duration::from_millis(20),
            || async { (self.ran.load(Ordering::SeqCst) >= target).then_some(()) },
        )
        .await
    }

    /// Stops the clients; (calls that ran, what failed).
    async fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        for worker in self.workers {
            worker.await.expect("a load client panicked");
        }
        let failed = self.failed.lock().unwrap().clone();
        (self.ran.load(Ordering::SeqCst), failed)
    }
}

/// Fails the test with the failed calls (the first ten) and the logs, if any call failed.
fn assert_none_failed(what: &str, (ran, failed): (usize, Vec<String>), cluster: &Cluster) {
    let summary = format!("{what}: {ran} calls ran, {} failed", failed.len());
    eprintln!("{summary}");
    assert!(
        failed.is_empty(),
        "{summary}:\n{}\n{}",
        failed
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        cluster.logs()
    );
}

#[tokio::test]
async fn a_replica_killed_under_load_fails_no_request() {
    let upstream = Upstream::start().await;
    let spec = spec_path("petstore-3.0.json");
    let flags = ["--stateless", "--key-rate", "0", "--session-rate", "0"];
    let mut cluster = Cluster::start(&spec, &upstream.url(), &flags, Balance::RoundRobin).await;
    let load = Load::start(&cluster);
    load.run_more(60).await;
    let victim = &mut cluster.replicas[0].proc.child;
    victim.start_kill().expect("SIGKILL");
    victim.wait().await.expect("the killed replica is reaped");
    cluster.lb.wait_down("r1").await;
    load.run_more(120).await;
    let (retried, redispatched) = cluster.lb.retries().await;
    let what = format!(
        "SIGKILL to replica 1 under load (HAProxy retried {retried} and redispatched \
         {redispatched})"
    );
    assert_none_failed(&what, load.stop().await, &cluster);
}

#[tokio::test]
async fn sigterm_drains_a_replica_under_load() {
    let upstream = Upstream::start().await;
    let spec = spec_path("petstore-3.0.json");
    let drain = DRAIN_TIMEOUT.as_secs().to_string();
    let flags = [
        "--stateless",
        "--key-rate",
        "0",
        "--session-rate",
        "0",
        "--drain-timeout",
        &drain,
    ];
    let mut cluster = Cluster::start(&spec, &upstream.url(), &flags, Balance::RoundRobin).await;
    let load = Load::start(&cluster);
    load.run_more(60).await;

    // A call on replica 1 that takes 10 s (the upstream's `/v2/user/slow`) is in flight when
    // SIGTERM comes: the replica finishes it before it exits.
    let slow = {
        let url = cluster.replicas[0].url("/mcp");
        let (key, token) = (cluster.key.clone(), cluster.token.clone());
        let call = tool_call(
            1,
            "api_execute",
            json!({"operationId": "getUserByName",
            "pathParams": {"username": "slow"}}),
        );
        tokio::spawn(async move {
            let headers = [("x-api-key", key.as_str()), ("x-session-token", &token)];
            post(&reqwest::Client::new(), &url, &headers, &call).await
        })
    };
    let every = Duration::from_millis(20);
    poll(
        "the slow call did not reach the upstream",
        Duration::from_secs(60),
        every,
        || async {
            upstream
                .requests()
                .iter()
                .any(|r| r.uri == "/v2/user/slow")
                .then_some(())
        },
    )
    .await;

    let replica = &mut cluster.replicas[0].proc;
    let pid = replica.child.id().expect("replica 1 runs");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill -TERM {pid} failed");
    let deadline = DRAIN_TIMEOUT + Duration::from_secs(15);
    let status = tokio::time::timeout(deadline, replica.child.wait()).await;
    let status = match status {
        Ok(status) => status.expect("replica 1 is reaped"),
        Err(_) => panic!(
            "replica 1 still runs {deadline:?} after SIGTERM (--drain-timeout {drain})\n{}",
            cluster.logs()
        ),
    };
    let slow = slow.await.expect("the slow call's task");
    load.run_more(120).await;
    let (retried, redispatched) = cluster.lb.retries().await;
    let counted = load.stop().await;
    let slow = match slow {
        Ok(answer) => match outcome(&answer) {
            Outcome::Ran(result) if result["status"] == 200 => None,
            _ => Some(answer.to_string()),
        },
        Err(e) => Some(format!("{e:#}")),
    };
    eprintln!(
        "SIGTERM to replica 1: exit {status}, the call in flight on it: {}",
        slow.as_deref().unwrap_or("answered 200")
    );
    let what = format!(
        "SIGTERM to replica 1 under load (HAProxy retried {retried} and redispatched \
         {redispatched})"
    );
    assert_none_failed(&what, counted, &cluster);
    assert!(
        slow.is_none(),
        "the call in flight on replica 1 failed: {slow:?}"
    );
    assert!(
        status.success(),
        "replica 1 exited with {status}\n{}",
        cluster.logs()
    );
}

#[tokio::test]
async fn a_call_cut_by_the_drain_timeout_keeps_its_audit_row() {
    // The red team's break: a call still running when --drain-timeout ended had reached the
    // API and left no audit row (its future was dropped before the row was written).
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let spec = spec_path("petstore-3.0.json");
    let env = [("DATABASE_URL", db.url.as_str())];
    let flags = ["--stateless", "--drain-timeout", "1"];
    let (mut replica, url) = spawn_serve(&spec, &upstream.url(), &flags, &env).await;
    let created = cli_key(&db.url, "cut", FEATURES).await;
    let key = created["key"].as_str().expect("the new key").to_string();
    let token = session(&db.url, "u-cut").await;
    let call = tool_call(
        1,
        "api_execute",
        json!({"operationId": "getUserByName", "pathParams": {"username": "slow"}}),
    );
    let answer = tokio::spawn(async move {
        let headers = [("x-api-key", key.as_str()), ("x-session-token", &token)];
        post(&reqwest::Client::new(), &url, &headers, &call).await
    });
    poll(
        "the slow call did not reach the upstream",
        Duration::from_secs(60),
        Duration::from_millis(20),
        || async {
            upstream
                .requests()
                .iter()
                .any(|r| r.uri == "/v2/user/slow")
                .then_some(())
        },
    )
    .await;
    let pid = replica.child.id().expect("the replica runs");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(30), replica.child.wait())
        .await
        .expect("the replica exits after its drain")
        .expect("the replica is reaped");
    assert!(status.success(), "{status:?}");
    let _ = answer.await;
    let pool = sqlx::PgPool::connect(&db.url)
        .await
        .expect("the test database");
    let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT decision, operation, error_code FROM audit_log WHERE tool = 'api_execute'",
    )
    .fetch_all(&pool)
    .await
    .expect("audit rows");
    assert_eq!(
        rows,
        [(
            "failed".to_string(),
            Some("getUserByName".to_string()),
            Some("CANCELLED".to_string())
        )]
    );
}
