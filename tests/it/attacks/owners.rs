//! See `attacks/mod.rs`. Monitor sessions and approvals belong to their owner:
//!
//! - item 11: the `sessionID` the monitor sees is made by apigate from what it validated (the
//!   key's fingerprint and the MCP session rmcp routed the call to, or the user session the
//!   token opened), never taken from the request's `mcp-session-id` header. Attacked with a
//!   real `apigate monitor` server (in-process) holding `max_tool_calls = 5`, in front of
//!   apigate over HTTP: rotating the header must not evade the limit, and naming a victim's
//!   session id must not use up the victim's quota.
//! - item 12: `apigate monitor`'s approval API needs the per-run secret only the page holds.
//!   Attacked with the real binary and a plain HTTP client (no cookie, guessed or wrong
//!   secrets): 401, and the held call stays held and never reaches the upstream.

use std::time::Duration;

use apigate::monitor::{self, RuleSet, RunningMonitor, ServerConfig};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    KEY, Proc, Server, Upstream, call, call_ok, engine_args, flags, mcp_client, spawn_serve,
    spec_path,
};

// ---- item 11: the monitor's session id ---------------------------------------------------

/// The rule under attack: a session may make 5 tool calls.
const BUDGET: &str = r#"
default = "allow"

[[rule]]
name = "budget"
action = "block"
max_tool_calls = 5
"#;

/// The reference monitor with [`BUDGET`], in-process on 127.0.0.1:0.
async fn budget_monitor() -> RunningMonitor {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    monitor::spawn(
        listener,
        ServerConfig {
            rules: RuleSet::from_toml_str(BUDGET).unwrap(),
            ..ServerConfig::default()
        },
    )
    .await
    .unwrap()
}

/// apigate (dev mode, petstore, recording upstream) gated by `monitor`.
async fn gated_apigate(monitor: &RunningMonitor, stateless: bool) -> (Server, Upstream) {
    let upstream = Upstream::start().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.monitor.monitor = Some(monitor.url());
    args.monitor.monitor_timeout = Duration::from_secs(30);
    (Server::start(args, stateless).await, upstream)
}

/// The `_meta` of a protocol 2026-07-28 request: it takes rmcp's per-request (sessionless)
/// path even on a stateful server, so no session validates its `mcp-session-id` header.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
    })
}

/// An MCP endpoint and the API key to call it with.
struct Mcp {
    url: String,
    key: String,
}

impl Mcp {
    fn of(server: &Server) -> Mcp {
        Mcp {
            url: server.url("/mcp"),
            key: KEY.to_owned(),
        }
    }
}

/// POSTs one JSON-RPC message to the endpoint with its API key and `headers`; returns the
/// status and the JSON-RPC message (from a JSON body or the first SSE `data:` with an id),
/// `Value::Null` for an empty 202.
async fn post_mcp(mcp: &Mcp, headers: &[(&str, &str)], body: Value) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .post(&mcp.url)
        .header("x-api-key", &mcp.key)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    let message = if is_sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    } else if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"raw": text}))
    };
    (status, message)
}

/// One `api_discover` call over raw HTTP with these headers (and the 2026-07-28 `_meta` when
/// `meta`); returns `Ok(())` when it ran and `Err(message)` when the monitor blocked it.
async fn discover(mcp: &Mcp, headers: &[(&str, &str)], meta: bool) -> Result<(), String> {
    let mut params =
        json!({"name": "api_discover", "arguments": {"query": "find pets", "limit": 1}});
    let mut headers = headers.to_vec();
    if meta {
        params["_meta"] = meta_2026();
        // The 2026-07-28 transport's own headers, as a conforming client sends them.
        headers.extend([
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "api_discover"),
        ]);
    }
    let (status, answer) = post_mcp(
        mcp,
        &headers,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "tools/call refused: {answer}");
    let result = &answer["result"];
    assert!(result.is_object(), "no tools/call result: {answer}");
    if result["isError"] == true {
        let content = &result["structuredContent"];
        assert_eq!(
            content["code"], "BLOCKED_BY_MONITOR",
            "the call failed for another reason: {answer}"
        );
        return Err(content["error"].as_str().unwrap_or_default().to_owned());
    }
    Ok(())
}

/// Eight calls (with `headers`), each naming a new `mcp-session-id`: the first five run, the
/// rest are stopped by the budget.
async fn rotate_and_count(mcp: &Mcp, headers: &[(&str, &str)], meta: bool) {
    let mut outcomes = Vec::new();
    for i in 0..8 {
        let fresh = format!("rotated-session-{i}");
        let mut all = headers.to_vec();
        all.push(("mcp-session-id", &fresh));
        outcomes.push(discover(mcp, &all, meta).await);
    }
    let ran = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(
        ran, 5,
        "rotating the mcp-session-id header evaded `max_tool_calls = 5`: {ran} of 8 calls ran: \
         {outcomes:?}"
    );
    assert!(outcomes[..5].iter().all(Result::is_ok), "{outcomes:?}");
    for blocked in &outcomes[5..] {
        let message = blocked.as_ref().unwrap_err();
        assert!(
            message.contains("budget") && message.contains("limit 5"),
            "{message}"
        );
    }
}

#[tokio::test]
async fn stateless_rotating_the_session_header_does_not_evade_the_call_limit() {
    let monitor = budget_monitor().await;
    let (server, _upstream) = gated_apigate(&monitor, true).await;
    rotate_and_count(&Mcp::of(&server), &[], false).await;
    drop(server);
    monitor.shutdown().await.unwrap();
}

#[tokio::test]
async fn stateful_rotating_the_session_header_with_2026_meta_does_not_evade_the_call_limit() {
    let monitor = budget_monitor().await;
    let (server, _upstream) = gated_apigate(&monitor, false).await;
    rotate_and_count(&Mcp::of(&server), &[], true).await;
    drop(server);
    monitor.shutdown().await.unwrap();
}

/// A real MCP session over raw HTTP (initialize, initialized); returns its id.
async fn open_session(server: &Server) -> String {
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "victim", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let id = response
        .headers()
        .get("mcp-session-id")
        .expect("a stateful server issues a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.text().await;
    let (status, _) = post_mcp(
        &Mcp::of(server),
        &[("mcp-session-id", &id)],
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    id
}

#[tokio::test]
async fn naming_a_victims_session_id_does_not_use_up_the_victims_quota() {
    let monitor = budget_monitor().await;
    let (server, _upstream) = gated_apigate(&monitor, false).await;
    let mcp = Mcp::of(&server);
    let victim = open_session(&server).await;
    let as_victim = [("mcp-session-id", victim.as_str())];
    for _ in 0..2 {
        discover(&mcp, &as_victim, false)
            .await
            .expect("the victim's own calls run");
    }
    // The attacker names the victim's session on sessionless (2026-07-28) requests.
    let mut attacker = Vec::new();
    for _ in 0..6 {
        attacker.push(discover(&mcp, &as_victim, true).await);
    }
    // The victim still has 3 of its 5 calls.
    for n in 3..=5 {
        let r = discover(&mcp, &as_victim, false).await;
        assert!(
            r.is_ok(),
            "the victim's call {n} of 5 was blocked: the attacker's calls were counted as the \
             victim's ({r:?}; attacker: {attacker:?})"
        );
    }
    let sixth = discover(&mcp, &as_victim, false).await;
    assert!(
        sixth.is_err(),
        "the victim's 6th call ran: the limit is off"
    );
    // The attacker's calls were counted, as its own (its key, no session): 5 ran.
    assert_eq!(
        attacker.iter().filter(|o| o.is_ok()).count(),
        5,
        "{attacker:?}"
    );
    drop(server);
    monitor.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_rmcp_client_sees_its_own_session_counted_across_calls() {
    // The honest path still works: one stateful client, its calls counted in one session.
    let monitor = budget_monitor().await;
    let (server, _upstream) = gated_apigate(&monitor, false).await;
    let client = mcp_client(&server.url("/mcp"), &[("x-api-key", KEY)]).await;
    let mut blocked = 0;
    for _ in 0..7 {
        let (err, r) = call(&client, "api_discover", json!({"query": "pets"})).await;
        if err {
            assert_eq!(r["code"], "BLOCKED_BY_MONITOR", "{r}");
            blocked += 1;
        }
    }
    assert_eq!(blocked, 2);
    // A second session of the same key has its own budget.
    let other = mcp_client(&server.url("/mcp"), &[("x-api-key", KEY)]).await;
    call_ok(&other, "api_discover", json!({"query": "pets"})).await;
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
    drop(server);
    monitor.shutdown().await.unwrap();
}

const BOOTSTRAP: &str = "bootstrap-key-for-the-owners-attacks-0123";

/// `apigate serve --stateless` (Postgres, the binary) gated by `monitor`; returns the process
/// and its base URL.
async fn gated_serve(
    database_url: &str,
    monitor: &RunningMonitor,
    upstream: &Upstream,
) -> (Proc, String) {
    let spec = spec_path("petstore-3.0.json");
    let (upstream_url, monitor_url) = (upstream.url(), monitor.url());
    let mut extra = flags(&[
        ("--key-rate", "0"),
        ("--session-rate", "0"),
        ("--monitor", &monitor_url),
        ("--monitor-timeout", "30s"),
    ]);
    extra.insert(0, "--stateless");
    let env = [
        ("DATABASE_URL", database_url),
        ("MCP_SERVER_API_KEY", BOOTSTRAP),
    ];
    let (proc, url) = spawn_serve(&spec, &upstream_url, &extra, &env).await;
    let base = url.trim_end_matches("/mcp").to_owned();
    (proc, base)
}

/// POSTs to the admin API with the bootstrap key; returns the created object.
async fn admin_create(base: &str, what: &str, body: Value) -> Value {
    let r = reqwest::Client::new()
        .post(format!("{base}/admin/v1/{what}"))
        .header("x-api-key", BOOTSTRAP)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "creating {what}");
    r.json().await.unwrap()
}

#[tokio::test]
async fn production_the_monitor_counts_the_validated_user_session_not_the_header() {
    let db = crate::db::TestDb::new().await;
    let monitor = budget_monitor().await;
    let upstream = Upstream::start().await;
    let (proc, base) = gated_serve(&db.url, &monitor, &upstream).await;
    let tools = json!(["apigate.discover", "apigate.schema", "apigate.execute"]);
    let key = admin_create(&base, "keys", json!({"name": "agent", "features": tools})).await;
    let mcp = Mcp {
        url: format!("{base}/mcp"),
        key: key["key"].as_str().unwrap().to_owned(),
    };
    let mut users = Vec::new();
    for user in ["rotator", "victim", "attacker"] {
        users.push(
            admin_create(
                &base,
                "sessions",
                json!({"userId": user, "features": tools}),
            )
            .await,
        );
    }
    let token = |i: usize| users[i]["token"].as_str().unwrap().to_owned();

    // Rotating the header within one user session does not evade the limit.
    let rotator = token(0);
    rotate_and_count(&mcp, &[("x-session-token", &rotator)], false).await;

    // The attacker names the victim's session (as the monitor used to know it) on its own
    // calls: the victim's quota is untouched.
    let victim = token(1);
    let victim_id = format!("session-{}", users[1]["id"].as_str().unwrap());
    let as_victim = [("x-session-token", victim.as_str())];
    for _ in 0..2 {
        discover(&mcp, &as_victim, false).await.unwrap();
    }
    let attacker = token(2);
    let mut attacks = Vec::new();
    for _ in 0..6 {
        let naming = [
            ("x-session-token", attacker.as_str()),
            ("mcp-session-id", victim_id.as_str()),
        ];
        attacks.push(discover(&mcp, &naming, false).await);
    }
    for n in 3..=5 {
        let r = discover(&mcp, &as_victim, false).await;
        assert!(
            r.is_ok(),
            "the victim's call {n} of 5 was blocked: the attacker's calls were counted as the \
             victim's ({r:?}; attacker: {attacks:?})\n{}",
            proc.log()
        );
    }
    assert!(discover(&mcp, &as_victim, false).await.is_err());
    assert_eq!(
        attacks.iter().filter(|o| o.is_ok()).count(),
        5,
        "{attacks:?}"
    );
    drop(proc);
    monitor.shutdown().await.unwrap();
}

/// A monitor that allows every call and keeps every event.
async fn recording_monitor() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    let events: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = Default::default();
    let seen = events.clone();
    let app = axum::Router::new().route(
        "/agent-monitor",
        axum::routing::post(move |body: String| {
            let seen = seen.clone();
            async move {
                let event: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push(event);
                r#"{"block": false}"#
            }
        }),
    );
    let addr = crate::support::serve_app(app).await;
    (format!("http://{addr}"), events)
}

#[tokio::test]
async fn a_sessions_events_carry_one_id_made_by_apigate_not_its_mcp_session_id() {
    let (monitor, events) = recording_monitor().await;
    let upstream = Upstream::start().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.monitor.monitor = Some(monitor);
    let server = Server::start(args, false).await;
    let session = open_session(&server).await;
    discover(&Mcp::of(&server), &[("mcp-session-id", &session)], false)
        .await
        .unwrap();
    let closed = reqwest::Client::new()
        .delete(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let kinds = [
        "session.started",
        "tool.pre_execute",
        "tool.post_execute",
        "session.idle",
    ];
    let mut seen = Vec::new();
    for _ in 0..600 {
        seen = events.lock().unwrap().clone();
        if kinds.iter().all(|k| seen.iter().any(|e| e["type"] == *k)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ids: Vec<&str> = kinds
        .iter()
        .map(|k| {
            seen.iter()
                .find(|e| e["type"] == *k)
                .unwrap_or_else(|| panic!("no {k}: {seen:#?}"))["sessionID"]
                .as_str()
                .unwrap()
        })
        .collect();
    // One id for the whole session: the key's fingerprint and a digest of the session.
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let key = apigate::mcp::fingerprint(KEY);
    assert!(ids[0].starts_with(&format!("{key}/mcp-")), "{ids:?}");
    // The MCP session id itself (a credential of the session) never reaches the monitor.
    let all = serde_json::to_string(&seen).unwrap();
    assert!(!all.contains(&session), "{all}");
}

// ---- item 12: self-approval ------------------------------------------------------------

/// `apigate monitor` (default rules: mutating calls wait for a person) as a child process.
/// Returns the process, its base URL and the page link it printed.
async fn monitor_binary() -> (Proc, String, String) {
    let (proc, link) = Proc::spawn(
        "monitor",
        &["monitor", "--listen", "127.0.0.1:0"],
        "dashboard:",
    )
    .await;
    let base = link
        .split("/?")
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    (proc, base, link)
}

/// The secret of the printed link (`…/?token=SECRET`), if it has one.
fn link_token(link: &str) -> Option<String> {
    url::Url::parse(link)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

/// The person's client: sends the page's secret as a bearer token (when there is one).
fn person(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let r = http.request(method, url);
    match token {
        Some(t) => r.bearer_auth(t),
        None => r,
    }
}

#[tokio::test]
async fn a_local_process_without_the_page_secret_cannot_approve_a_held_call() {
    let (proc, base, link) = monitor_binary().await;
    let token = link_token(&link);
    let upstream = Upstream::start().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.monitor.monitor = Some(base.clone());
    args.monitor.monitor_timeout = Duration::from_secs(120);
    let apigate = Server::start(args, false).await;
    let client = apigate.client().await;

    // The agent's DELETE waits for a person.
    let peer = client.peer().clone();
    let held = tokio::spawn(async move {
        call(
            &peer,
            "api_execute",
            json!({"operationId": "deletePet", "pathParams": {"petId": 7}}),
        )
        .await
    });
    let http = reqwest::Client::new();
    let mut approval = None;
    for _ in 0..600 {
        let r = person(
            &http,
            reqwest::Method::GET,
            format!("{base}/api/approvals"),
            token.as_deref(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status(), 200, "{}", proc.log());
        let list: Value = r.json().await.unwrap();
        if let Some(a) = list.as_array().unwrap().first() {
            approval = Some(a["id"].as_str().unwrap().to_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let id = approval.unwrap_or_else(|| panic!("no approval appeared\n{}", proc.log()));

    // The agent, with a shell, tries to approve its own call: no cookie, no secret; a wrong
    // secret as a bearer token, as a cookie and in the query.
    let approve = format!("{base}/api/approvals/{id}/approve");
    let attempts = [
        ("no secret", http.post(&approve)),
        ("a wrong bearer", http.post(&approve).bearer_auth("guessed")),
        (
            "a wrong cookie",
            http.post(&approve).header(
                "cookie",
                "apigate_monitor=guessed; apigate_monitor_token=guessed",
            ),
        ),
        (
            "a wrong query",
            http.post(format!("{approve}?token=guessed")),
        ),
    ];
    for (what, attempt) in attempts {
        let r = attempt.send().await.unwrap();
        let status = r.status();
        let body = r.text().await.unwrap();
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "self-approval with {what} was not refused: {status} {body}"
        );
        assert!(body.contains("secret"), "{what}: unclear message: {body}");
    }
    // Nor can it read the pending approvals, deny, or watch the stream.
    for (method, path) in [
        (reqwest::Method::GET, "/api/approvals".to_owned()),
        (reqwest::Method::GET, "/api/state".to_owned()),
        (reqwest::Method::GET, "/api/events".to_owned()),
        (reqwest::Method::GET, "/api/stream".to_owned()),
        (reqwest::Method::POST, format!("/api/approvals/{id}/deny")),
    ] {
        let r = http
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
    }

    // The call is still held, and never reached the upstream.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "the held call was released");
    assert!(upstream.requests().is_empty(), "the DELETE ran");
    let token = token.expect("the printed link carries the page's secret");
    let list: Value = person(
        &http,
        reqwest::Method::GET,
        format!("{base}/api/approvals"),
        Some(&token),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["status"], "pending");

    // The person (with the secret) denies it: the call is blocked and never runs.
    let r = person(
        &http,
        reqwest::Method::POST,
        format!("{base}/api/approvals/{id}/deny"),
        Some(&token),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let (err, result) = held.await.unwrap();
    assert!(err, "{result}");
    assert_eq!(result["code"], "BLOCKED_BY_MONITOR");
    assert!(upstream.requests().is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_printed_link_sets_an_http_only_strict_cookie_that_opens_the_api() {
    let (proc, base, link) = monitor_binary().await;
    let token = link_token(&link)
        .unwrap_or_else(|| panic!("the printed link {link} has no secret\n{}", proc.log()));
    assert!(token.len() >= 32, "a short secret: {token}");
    // The secret is printed for the person, never logged anywhere else.
    assert_eq!(proc.stderr().matches(&token).count(), 1, "{}", proc.log());

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // The page without the link's secret says how to get in.
    let r = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("?token="));
    let r = http
        .get(format!("{base}/?token=not-the-secret"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get("set-cookie").is_none());

    // The link sets the cookie and sends the browser to the bare page (no secret in history).
    let r = http.get(&link).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let pair = cookie.split(';').next().unwrap().to_owned();
    assert!(pair.ends_with(&format!("={token}")), "{cookie}");

    // With the cookie, the page and the API answer.
    let r = http
        .get(format!("{base}/"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("apigate monitor"));
    let r = http
        .get(format!("{base}/api/state"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The protocol endpoint and /health stay open to apigate.
    let r = http.get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .post(format!("{base}/agent-monitor"))
        .json(
            &json!({"type": "session.started", "timestamp": 1, "project": "p",
            "directory": "d", "worktree": "w", "sessionID": "s", "startTime": 1}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
