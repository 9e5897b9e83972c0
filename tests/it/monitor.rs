//! The agent-monitor gate against real HTTP monitors: small axum apps that each answer one
//! way (allow, block, 500, invalid JSON, no `block`, never) or are down, and the reference
//! monitor (`apigate monitor`) with rules, approvals, its HTTP API and its JSONL log.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apigate::monitor::{
    self, BlockCause, Blocked, Monitor, MonitorConfig, OperationRef, RuleSet, RunningMonitor,
    ServerConfig, ToolCall,
};
use apigate::tools::Tool;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::{any, post};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::support::serve_app;

const SESSION_TOKEN: &str = "sess_0123456789abcdef0123456789abcdef";
const API_KEY: &str = "agk_AbCdEfGh_supersecretkeymaterial0123456789";

/// How a test monitor answers `tool.pre_execute`.
#[derive(Clone)]
pub(crate) enum Behavior {
    Answer(StatusCode, &'static str),
    Hang,
}

pub(crate) type Received = Arc<Mutex<Vec<Value>>>;

/// A monitor that records every event it receives and answers as told.
pub(crate) async fn test_monitor(behavior: Behavior) -> (String, Received) {
    let received: Received = Arc::default();
    let rec = received.clone();
    let app = Router::new().route(
        "/agent-monitor",
        post(move |body: String| {
            let rec = rec.clone();
            let behavior = behavior.clone();
            async move {
                let event: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let is_pre = event["type"] == "tool.pre_execute";
                rec.lock().unwrap().push(event);
                if !is_pre {
                    return (StatusCode::OK, "OK".to_owned());
                }
                match behavior {
                    Behavior::Answer(status, body) => (status, body.to_owned()),
                    Behavior::Hang => std::future::pending().await,
                }
            }
        }),
    );
    let addr = serve_app(app).await;
    (format!("http://{addr}"), received)
}

/// The upstream API a tool call would reach; counts the requests it received.
async fn upstream() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = Router::new().fallback(any(move || {
        let h = h.clone();
        async move {
            h.fetch_add(1, Ordering::SeqCst);
            "{}"
        }
    }));
    (format!("http://{}", serve_app(app).await), hits)
}

fn client(url: &str, timeout: Duration) -> Monitor {
    let mut cfg = MonitorConfig::new(url);
    cfg.timeout = timeout;
    cfg.project = "Petstore".into();
    cfg.directory = "/srv/petstore".into();
    cfg.worktree = "/srv/petstore-wt".into();
    Monitor::new(cfg).unwrap()
}

/// Arguments as an agent sends them, full of things that must not reach the monitor.
fn execute_args(method: &str, path: &str) -> Value {
    json!({
        "method": method,
        "path": path,
        "pathParams": {"petId": 42},
        "headers": {"Authorization": format!("Bearer {API_KEY}"), "X-Request-Id": "abc"},
        "query": {"api_key": API_KEY},
        "body": {"password": "hunter2-body-secret"},
        "_sessionToken": SESSION_TOKEN,
    })
}

/// What the tools pipeline does around the gate: the upstream is called only when allowed.
async fn gated_call(
    gate: &Monitor,
    upstream_url: &str,
    session: &str,
    call_id: &str,
    method: &str,
    path: &str,
) -> Result<(), Blocked> {
    let args = execute_args(method, path);
    let op_id = format!(
        "{}{}",
        method.to_lowercase(),
        path.replace(['/', '{', '}'], "_")
    );
    let call = ToolCall {
        session_id: session,
        call_id,
        tool: Tool::Execute,
        args: &args,
        operation: Some(OperationRef {
            operation_id: &op_id,
            method,
            path,
        }),
        preview: None,
    };
    match gate.pre_execute(&call).await {
        Ok(()) => {
            let resp = reqwest::Client::new()
                .request(method.parse().unwrap(), format!("{upstream_url}{path}"))
                .send()
                .await
                .unwrap();
            let len = resp.bytes().await.unwrap().len();
            gate.post_execute(&call, len);
            Ok(())
        }
        Err(blocked) => {
            gate.session_error(session, "BLOCKED_BY_MONITOR");
            Err(blocked)
        }
    }
}

/// Polls until `f` gives `Some` (events sent in the background arrive a little later).
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..1000 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("gave up waiting for {what}");
}

fn assert_no_secrets(events: &[Value]) {
    let text = serde_json::to_string(events).unwrap();
    for secret in [
        SESSION_TOKEN,
        "0123456789abcdef0123456789abcdef",
        API_KEY,
        "supersecretkeymaterial",
        "hunter2",
        "Bearer",
        "_sessionToken",
    ] {
        assert!(
            !text.contains(secret),
            "{secret:?} reached the monitor: {text}"
        );
    }
}

#[tokio::test]
async fn gate_allows_and_sends_the_protocol_events() {
    let (url, received) =
        test_monitor(Behavior::Answer(StatusCode::OK, r#"{"block": false}"#)).await;
    let (up, hits) = upstream().await;
    let gate = client(&url, Duration::from_secs(10));

    gated_call(
        &gate,
        &up,
        "mcp-session-1",
        "call-1",
        "GET",
        "/pets/{petId}",
    )
    .await
    .unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // A second tool in the same session: the stats count both.
    let args = json!({"query": "list pets", "limit": 5, "_sessionToken": SESSION_TOKEN});
    let discover = ToolCall {
        session_id: "mcp-session-1",
        call_id: "call-2",
        tool: Tool::Discover,
        args: &args,
        operation: None,
        preview: None,
    };
    gate.pre_execute(&discover).await.unwrap();
    gate.session_idle("mcp-session-1");

    let events = eventually("5 events at the monitor", || async {
        let ev = received.lock().unwrap().clone();
        (ev.len() >= 5).then_some(ev)
    })
    .await;
    assert_no_secrets(&events);
    let of = |kind: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .cloned()
            .collect()
    };
    // session.started is sent (and awaited) before the first pre_execute of a new session.
    assert_eq!(events[0]["type"], "session.started");
    assert_eq!(events[1]["type"], "tool.pre_execute");
    assert_eq!(of("session.started").len(), 1);
    for e in &events {
        assert!(e["timestamp"].as_i64().unwrap() > 1_600_000_000_000, "{e}");
        assert_eq!(e["project"], "Petstore");
        assert_eq!(e["directory"], "/srv/petstore");
        assert_eq!(e["worktree"], "/srv/petstore-wt");
        assert_eq!(e["sessionID"], "mcp-session-1");
    }
    let started = &of("session.started")[0];
    assert_eq!(started["startTime"], started["timestamp"]);

    let pre = of("tool.pre_execute");
    assert_eq!(pre[0]["tool"], "api_execute");
    assert_eq!(pre[0]["callID"], "call-1");
    assert_eq!(
        pre[0]["args"],
        json!({
            "method": "GET", "path": "/pets/{petId}", "operationId": "get_pets__petId_",
            "pathParams": "object", "headers": "object", "query": "object", "body": "object",
        })
    );
    assert_eq!(pre[0]["sessionStats"]["toolCallCount"], 1);
    assert_eq!(pre[0]["sessionStats"]["uniqueTools"], 1);
    assert!(pre[0]["sessionStats"]["duration"].is_u64());
    assert_eq!(
        pre[1]["args"],
        json!({"query": "list pets", "limit": "number"})
    );
    assert_eq!(pre[1]["sessionStats"]["toolCallCount"], 2);
    assert_eq!(pre[1]["sessionStats"]["uniqueTools"], 2);

    let post = &of("tool.post_execute")[0];
    assert_eq!(post["callID"], "call-1");
    assert_eq!(post["tool"], "api_execute");
    assert_eq!(post["outputLength"], 2);
    assert!(
        post["title"]
            .as_str()
            .unwrap()
            .contains("GET /pets/{petId}")
    );

    let idle = &of("session.idle")[0];
    assert_eq!(idle["finalStats"]["totalToolCalls"], 2);
    assert_eq!(
        idle["finalStats"]["uniqueTools"],
        json!(["api_discover", "api_execute"])
    );
    assert_eq!(gate.tracked_sessions(), 0);
}

#[tokio::test]
async fn explicit_session_start_is_sent_once() {
    let (url, received) =
        test_monitor(Behavior::Answer(StatusCode::OK, r#"{"block": false}"#)).await;
    let gate = client(&url, Duration::from_secs(10));
    gate.session_started("s-1");
    gate.session_started("s-1");
    let args = json!({"operationId": "listPets"});
    let call = ToolCall {
        session_id: "s-1",
        call_id: "c-1",
        tool: Tool::Schema,
        args: &args,
        operation: None,
        preview: None,
    };
    gate.pre_execute(&call).await.unwrap();
    gate.session_error("s-1", "UPSTREAM_TIMEOUT with token=abc123secret");
    let events = eventually("3 events", || async {
        let ev = received.lock().unwrap().clone();
        (ev.len() >= 3).then_some(ev)
    })
    .await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "session.started").count(),
        1,
        "{kinds:?}"
    );
    let error = events
        .iter()
        .find(|e| e["type"] == "session.error")
        .unwrap();
    assert_eq!(error["error"], "UPSTREAM_TIMEOUT with [redacted]");
    let pre = events
        .iter()
        .find(|e| e["type"] == "tool.pre_execute")
        .unwrap();
    assert_eq!(pre["args"], json!({"operationId": "listPets"}));
}

/// Runs one call against a misbehaving monitor; it must be blocked and the upstream untouched.
async fn assert_blocked(url: &str, timeout: Duration, cause: BlockCause, needle: &str) {
    let (up, hits) = upstream().await;
    let gate = client(url, timeout);
    let blocked = gated_call(&gate, &up, "s", "c", "DELETE", "/pets/{petId}")
        .await
        .unwrap_err();
    assert_eq!(blocked.cause, cause, "{blocked}");
    assert!(
        blocked.to_string().contains(needle),
        "{needle:?} not in {blocked}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the upstream was called although the monitor blocked"
    );
}

/// Each way a monitor's answer blocks the call: its own reason, an error or redirect status,
/// invalid JSON, no boolean `block`.
#[tokio::test]
async fn gate_blocks_on_each_blocking_answer() {
    let cases = [
        (
            StatusCode::OK,
            r#"{"block": true, "reason": "No deletes on Fridays"}"#,
            BlockCause::Monitor,
            "blocked by the agent monitor: No deletes on Fridays",
        ),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"block": false}"#,
            BlockCause::Status(500),
            "returned HTTP 500",
        ),
        (
            StatusCode::TEMPORARY_REDIRECT,
            "",
            BlockCause::Status(307),
            "returned HTTP 307",
        ),
        (
            StatusCode::OK,
            "OK",
            BlockCause::InvalidJson,
            "invalid JSON",
        ),
        (
            StatusCode::OK,
            r#"{"allow": true}"#,
            BlockCause::MissingBlock,
            "boolean `block`",
        ),
        (
            StatusCode::OK,
            r#"{"block": "false"}"#,
            BlockCause::MissingBlock,
            "boolean `block`",
        ),
    ];
    for (status, body, cause, needle) in cases {
        let (url, received) = test_monitor(Behavior::Answer(status, body)).await;
        assert_blocked(&url, Duration::from_secs(10), cause, needle).await;
        assert_no_secrets(&received.lock().unwrap());
    }
}

#[tokio::test]
async fn gate_blocks_when_the_monitor_is_down() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    assert_blocked(
        &format!("http://{addr}"),
        Duration::from_secs(10),
        BlockCause::Unreachable,
        "is unreachable",
    )
    .await;
}

#[tokio::test]
async fn gate_blocks_when_the_monitor_is_too_slow() {
    let (url, received) = test_monitor(Behavior::Hang).await;
    assert_blocked(
        &url,
        Duration::from_millis(300),
        BlockCause::Timeout,
        "did not answer within 300ms",
    )
    .await;
    // It did receive the call; it just never answered.
    assert!(
        received
            .lock()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "tool.pre_execute")
    );
}

// ---- the reference monitor -------------------------------------------------------------

async fn reference_monitor(rules: &str, approval_timeout: Duration) -> RunningMonitor {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = ServerConfig {
        rules: RuleSet::from_toml_str(rules).unwrap(),
        approval_timeout,
        ..ServerConfig::default()
    };
    monitor::spawn(listener, config).await.unwrap()
}

/// [`reference_monitor`], its URL, and [`person`] at its page.
async fn monitor_and_person(
    rules: &str,
    approval_timeout: Duration,
) -> (RunningMonitor, String, reqwest::Client) {
    let server = reference_monitor(rules, approval_timeout).await;
    let (base, http) = (server.url(), person(&server));
    (server, base, http)
}

/// The person at the page: a client that sends this run's secret, as the page's cookie does.
fn person(server: &RunningMonitor) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {}", server.secret());
    headers.insert(reqwest::header::AUTHORIZATION, bearer.parse().unwrap());
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let response = http.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "GET {url}");
    response.json().await.unwrap()
}

/// Waits for the one pending approval of `call_id` and returns its id.
async fn pending_approval(http: &reqwest::Client, base: &str, call_id: &str) -> String {
    eventually("a pending approval", || async {
        let approvals = get_json(http, &format!("{base}/api/approvals")).await;
        approvals
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["callID"] == call_id)
            .map(|a| a["id"].as_str().unwrap().to_owned())
    })
    .await
}

/// A person's decision on the approval `id` through the monitor's API (`verb`: `approve` or
/// `deny`, with `body` as JSON when given).
async fn decide(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    verb: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = http.post(format!("{base}/api/approvals/{id}/{verb}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

const RULES: &str = r#"
[[rule]]
name = "no-admin"
action = "block"
reason = "The admin API is off limits."
path = "/admin/**"

[[rule]]
name = "approve-writes"
action = "require_approval"
tool = "api_execute"
mutating = true
"#;

#[tokio::test]
async fn reference_monitor_allows_blocks_and_holds_for_approval() {
    let (server, base, http) = monitor_and_person(RULES, Duration::from_secs(120)).await;
    let gate = client(&base, Duration::from_secs(120));
    let (up, hits) = upstream().await;

    gated_call(&gate, &up, "s-1", "get-1", "GET", "/pets")
        .await
        .unwrap();
    let blocked = gated_call(&gate, &up, "s-1", "admin-1", "GET", "/admin/users/{id}")
        .await
        .unwrap_err();
    assert_eq!(blocked.cause, BlockCause::Monitor);
    assert!(blocked.to_string().contains("The admin API is off limits."));

    // A DELETE is held until a person approves it through the API.
    let held = tokio::spawn({
        let (gate, up) = (gate.clone(), up.clone());
        async move { gated_call(&gate, &up, "s-1", "del-1", "DELETE", "/pets/{petId}").await }
    });
    let id = pending_approval(&http, &base, "del-1").await;
    assert!(!held.is_finished());
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "only the GET went through so far"
    );
    let resp = decide(&http, &base, &id, "approve", None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.json::<Value>().await.unwrap()["status"], "approved");
    held.await.unwrap().unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    // Another is denied, with a reason the agent gets to read.
    let held = tokio::spawn({
        let (gate, up) = (gate.clone(), up.clone());
        async move { gated_call(&gate, &up, "s-1", "del-2", "DELETE", "/pets/{petId}").await }
    });
    let id = pending_approval(&http, &base, "del-2").await;
    let resp = decide(
        &http,
        &base,
        &id,
        "deny",
        Some(json!({"reason": "not this pet"})),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let blocked = held.await.unwrap().unwrap_err();
    assert_eq!(blocked.cause, BlockCause::Monitor);
    assert!(
        blocked
            .to_string()
            .contains("denied by a person: not this pet"),
        "{blocked}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "a denied call never reached the upstream"
    );

    // Deciding twice is a 404.
    let resp = decide(&http, &base, &id, "approve", None).await;
    assert_eq!(resp.status(), 404);

    let decisions = get_json(&http, &format!("{base}/api/decisions")).await;
    let brief: Vec<(String, bool, String)> = decisions
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["callID"].as_str().unwrap().to_owned(),
                d["block"].as_bool().unwrap(),
                d["by"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            ("get-1".to_owned(), false, "default".to_owned()),
            ("admin-1".to_owned(), true, "rule".to_owned()),
            ("del-1".to_owned(), false, "approved".to_owned()),
            ("del-2".to_owned(), true, "denied".to_owned()),
        ]
    );
    let sessions = eventually("session stats", || async {
        let sessions = get_json(&http, &format!("{base}/api/sessions")).await;
        let s = sessions[0].clone();
        (s["toolCallCount"] == 4 && s["errors"] == 2).then_some(s)
    })
    .await;
    assert_eq!(sessions["sessionID"], "s-1");
    assert_eq!(sessions["blocked"], 2);
    assert_eq!(sessions["project"], "Petstore");
    let events = get_json(&http, &format!("{base}/api/events")).await;
    assert_no_secrets(events.as_array().unwrap());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn reference_monitor_blocks_when_approval_times_out() {
    let server = reference_monitor(RULES, Duration::from_millis(200)).await;
    let gate = client(&server.url(), Duration::from_secs(30));
    let (up, hits) = upstream().await;
    let blocked = gated_call(&gate, &up, "s", "c", "PATCH", "/pets/{petId}")
        .await
        .unwrap_err();
    assert_eq!(
        blocked.reason,
        "blocked by the agent monitor: approval timed out"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let approvals = get_json(&person(&server), &format!("{}/api/approvals", server.url())).await;
    assert_eq!(approvals, json!([]));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn reference_monitor_drops_an_approval_the_agent_gave_up_on() {
    let (server, base, http) = monitor_and_person(RULES, Duration::from_secs(600)).await;
    // The agent side waits 300 ms only: far less than a person needs.
    let gate = client(&base, Duration::from_millis(300));
    let (up, hits) = upstream().await;
    let blocked = gated_call(&gate, &up, "s", "gone-1", "DELETE", "/pets/{petId}")
        .await
        .unwrap_err();
    assert_eq!(blocked.cause, BlockCause::Timeout);
    assert!(
        blocked.to_string().contains("longer monitor timeout"),
        "{blocked}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // The monitor notices the closed connection: no stale card waits for a person.
    let decision = eventually("the abandoned decision", || async {
        let decisions = get_json(&http, &format!("{base}/api/decisions")).await;
        decisions
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["callID"] == "gone-1")
            .cloned()
    })
    .await;
    assert_eq!(decision["by"], "abandoned");
    assert_eq!(decision["block"], true);
    assert_eq!(
        get_json(&http, &format!("{base}/api/approvals")).await,
        json!([])
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn reference_monitor_shutdown_blocks_held_calls() {
    let server = reference_monitor(RULES, Duration::from_secs(600)).await;
    let base = server.url();
    let gate = client(&base, Duration::from_secs(600));
    let (up, hits) = upstream().await;
    let held = tokio::spawn({
        let gate = gate.clone();
        async move { gated_call(&gate, &up, "s", "c", "POST", "/pets").await }
    });
    pending_approval(&person(&server), &base, "c").await;
    server.shutdown().await.unwrap();
    let blocked = held.await.unwrap().unwrap_err();
    assert!(blocked.to_string().contains("shutting down"), "{blocked}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn reference_monitor_counts_calls_and_matches_arguments() {
    let rules = r#"
        [[rule]]
        name = "budget"
        action = "block"
        max_tool_calls = 3
        [[rule]]
        name = "burst"
        action = "block"
        tool = "api_discover"
        max_calls_per_minute = 1
        [[rule]]
        name = "sql"
        action = "block"
        tool = "api_schema"
        args = { operationId = "(?i)^drop" }
    "#;
    let server = reference_monitor(rules, Duration::from_secs(10)).await;
    let gate = client(&server.url(), Duration::from_secs(10));
    let call = |session: &'static str, tool: Tool, args: Value| {
        let gate = gate.clone();
        async move {
            let c = ToolCall {
                session_id: session,
                call_id: "c",
                tool,
                args: &args,
                operation: None,
                preview: None,
            };
            gate.pre_execute(&c).await
        }
    };
    let pets = || json!({"query": "pets"});
    let list = || json!({"operationId": "listPets"});
    // (session, tool, arguments, the rule that blocks the call if one does)
    let steps = [
        // burst: one discover a minute per session.
        ("a", Tool::Discover, pets(), None),
        ("a", Tool::Discover, pets(), Some("burst")),
        ("b", Tool::Discover, pets(), None),
        // argument regex on the sanitized args.
        (
            "c",
            Tool::Schema,
            json!({"operationId": "dropTables"}),
            Some("sql"),
        ),
        // budget: the 4th call of a session.
        ("d", Tool::Schema, list(), None),
        ("d", Tool::Schema, list(), None),
        ("d", Tool::Schema, list(), None),
        (
            "d",
            Tool::Schema,
            list(),
            Some("4 calls in this session, limit 3"),
        ),
    ];
    for (session, tool, args, blocked_by) in steps {
        let outcome = call(session, tool, args).await;
        match blocked_by {
            None => outcome.unwrap(),
            Some(rule) => {
                let b = outcome.unwrap_err();
                assert!(b.reason.contains(rule), "{session} {}: {b}", tool.name());
            }
        }
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn reference_monitor_speaks_http_properly() {
    let (server, base, http) = monitor_and_person(RULES, Duration::from_secs(10)).await;
    let endpoint = format!("{base}/agent-monitor");
    // Each request and its status, in order: malformed events and unknown paths first.
    let refused = |cases: Vec<(reqwest::RequestBuilder, u16)>| async move {
        for (request, want) in cases {
            let what = format!("{request:?}");
            assert_eq!(request.send().await.unwrap().status(), want, "{what}");
        }
    };
    refused(vec![
        (http.post(&endpoint).body("{nope"), 400),
        (http.post(&endpoint).body("[1]"), 400),
        (http.get(&endpoint), 404),
        (http.post(format!("{endpoint}/x")).body("{}"), 404),
    ])
    .await;
    for kind in [
        "session.started",
        "tool.post_execute",
        "session.error",
        "session.idle",
    ] {
        let r = http
            .post(&endpoint)
            .json(
                &json!({"type": kind, "timestamp": 1, "project": "p", "directory": "d",
                "worktree": "w", "sessionID": "s"}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{kind}");
    }
    let r = http
        .post(&endpoint)
        .json(&json!({"type": "tool.pre_execute", "timestamp": 1, "project": "p",
            "directory": "d", "worktree": "w", "sessionID": "s", "callID": "c", "tool": "api_discover",
            "args": {"query": "x"}, "sessionStats": {"toolCallCount": 1, "uniqueTools": 1, "duration": 0}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"block": false}));

    // Another web site cannot approve calls or post events from a browser, nor read through
    // DNS rebinding; an unknown approval is 404.
    let evil = "https://evil.example";
    refused(vec![
        (
            http.post(format!("{base}/api/approvals/ap-1/approve"))
                .header("Origin", evil),
            403,
        ),
        (http.post(&endpoint).header("Origin", evil).body("{}"), 403),
        (
            http.get(format!("{base}/api/state"))
                .header("Host", "evil.example"),
            403,
        ),
        (http.post(format!("{base}/api/approvals/ap-9/deny")), 404),
    ])
    .await;

    let page = http.get(&base).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("apigate monitor"));
    let state = get_json(&http, &format!("{base}/api/state")).await;
    assert_eq!(state["events"].as_array().unwrap().len(), 5);
    assert_eq!(state["rules"]["rules"][0]["name"], "no-admin");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn reference_monitor_appends_to_its_jsonl_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = monitor::spawn(
        listener,
        ServerConfig {
            log: Some(log.clone()),
            ..ServerConfig::default()
        },
    )
    .await
    .unwrap();
    let gate = client(&server.url(), Duration::from_secs(10));
    let (up, _) = upstream().await;
    gated_call(&gate, &up, "s", "c", "GET", "/pets")
        .await
        .unwrap();
    server.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "event" && l["event"]["type"] == "tool.pre_execute")
    );
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "decision" && l["block"] == false)
    );
    assert_no_secrets(&lines);
}
