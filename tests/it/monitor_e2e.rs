//! The agent-monitor gate end to end with the real binaries: `apigate monitor` (the rules of
//! `examples/monitor-rules.toml`) and `apigate dev --monitor …` as child processes, an MCP
//! client over Streamable HTTP, the recording petstore upstream, and a person approving or
//! denying through the monitor's HTTP API. Plus an in-process check that no credential or
//! session token reaches a monitor, whatever the agent puts in its arguments.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::support::{
    KEY, Proc, Server, Upstream, call, engine_args, execute_ok, mcp_client, spawn_dev, spec_path,
};

/// Polls `GET {base}/health` until it answers 200.
async fn wait_healthy(base: &str, proc: &Proc) {
    let http = reqwest::Client::new();
    for _ in 0..600 {
        if let Ok(r) = http.get(format!("{base}/health")).send().await
            && r.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{base}/health never answered\n{}", proc.log());
}

/// Waits until the monitor holds a pending approval for `operation_id` and returns it.
async fn pending_approval(
    http: &reqwest::Client,
    monitor: &str,
    operation_id: &str,
    proc: &Proc,
) -> Value {
    for _ in 0..1200 {
        let approvals: Value =
            crate::support::send_json(http.get(format!("{monitor}/api/approvals"))).await;
        if let Some(a) = approvals
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["args"]["operationId"] == operation_id)
        {
            return a.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "no pending approval for {operation_id} appeared\n{}",
        proc.log()
    );
}

fn deletes(upstream: &Upstream, uri: &str) -> usize {
    upstream
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE" && r.uri == uri)
        .count()
}

/// `apigate monitor` (example rules) and `apigate dev --monitor` in front of `upstream`.
struct Stack {
    monitor_proc: Proc,
    /// `http://127.0.0.1:PORT` of the monitor.
    monitor: String,
    /// The person at the monitor's page: sends the secret of the link the monitor printed.
    person: reqwest::Client,
    dev_proc: Proc,
    /// apigate's MCP endpoint.
    mcp_url: String,
}

impl Stack {
    /// The pending approval of a `deletePet` call, once the monitor holds it.
    async fn pending_delete(&self) -> Value {
        let (person, monitor) = (&self.person, &self.monitor);
        pending_approval(person, monitor, "deletePet", &self.monitor_proc).await
    }

    async fn start(upstream: &Upstream, stateless: bool) -> Stack {
        let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/monitor-rules.toml");
        let (monitor_proc, link) = Proc::spawn(
            "monitor",
            &["monitor", "--listen", "127.0.0.1:0", "--rules", rules],
            "dashboard:",
        )
        .await;
        let link = url::Url::parse(&link).unwrap();
        let monitor = link.origin().ascii_serialization();
        let secret = link
            .query_pairs()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("no secret in the link {link}\n{}", monitor_proc.log()));
        let mut headers = reqwest::header::HeaderMap::new();
        let bearer = format!("Bearer {secret}");
        headers.insert(reqwest::header::AUTHORIZATION, bearer.parse().unwrap());
        let person = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        wait_healthy(&monitor, &monitor_proc).await;
        let spec = spec_path("petstore-3.0.json");
        let upstream_url = upstream.url();
        let mut gate = vec!["--monitor", &monitor, "--monitor-timeout", "5m"];
        if stateless {
            gate.push("--stateless");
        }
        let (dev_proc, mcp_url) = spawn_dev(&spec, Some(&upstream_url), &gate, &[]).await;
        wait_healthy(mcp_url.trim_end_matches("/mcp"), &dev_proc).await;
        Stack {
            monitor_proc,
            monitor,
            person,
            dev_proc,
            mcp_url,
        }
    }

    fn logs(&self) -> String {
        format!("{}\n{}", self.monitor_proc.log(), self.dev_proc.log())
    }

    async fn get(&self, path: &str) -> Value {
        self.person
            .get(format!("{}{path}", self.monitor))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// `api_execute` of `operation` on the pet `id`.
fn pet(operation: &str, id: u32) -> Value {
    json!({"operationId": operation, "pathParams": {"petId": id}})
}

/// A person's decision on the `approval` (`verb`: `approve` or `deny`, with `body` as JSON
/// when given) through the monitor's API at `monitor`.
async fn decide(
    http: &reqwest::Client,
    monitor: &str,
    approval: &Value,
    verb: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let id = approval["id"].as_str().unwrap();
    let mut request = http.post(format!("{monitor}/api/approvals/{id}/{verb}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn real_binaries_reads_pass_deletes_wait_for_a_person() {
    let upstream = Upstream::start().await;
    let stack = Stack::start(&upstream, false).await;
    let (monitor_proc, monitor) = (&stack.monitor_proc, stack.monitor.as_str());
    let logs = || stack.logs();
    let client = mcp_client(&stack.mcp_url, &[("x-api-key", KEY)]).await;

    // A read passes straight through (default: allow).
    let (err, r) = call(&client, "api_execute", pet("getPetById", 42)).await;
    assert!(!err, "{r}\n{}", logs());
    assert_eq!(r["status"], 200);
    assert_eq!(r["body"]["name"], "Rex");
    assert_eq!(upstream.requests().last().unwrap().uri, "/v2/pet/42");

    // A DELETE waits; a person approves it; then it reaches the upstream.
    let http = stack.person.clone();
    let (approved_call, approval) =
        tokio::join!(call(&client, "api_execute", pet("deletePet", 7)), async {
            let a = pending_approval(&http, monitor, "deletePet", monitor_proc).await;
            assert_eq!(a["status"], "pending");
            assert_eq!(a["rule"], "approve-deletes");
            assert_eq!(a["args"]["method"], "DELETE");
            assert_eq!(a["args"]["path"], "/pet/{petId}");
            // The person sees which pet: the request itself, not just its shape.
            assert_eq!(a["preview"]["method"], "DELETE");
            assert_eq!(a["preview"]["url"], format!("{}/v2/pet/7", upstream.url()));
            assert_eq!(
                deletes(&upstream, "/v2/pet/7"),
                0,
                "the DELETE ran before anyone approved it"
            );
            // The same session's other calls do not queue behind the held one.
            let (err, r) = call(&client, "api_execute", pet("getPetById", 43)).await;
            assert!(!err, "a read behind a held DELETE failed: {r}");
            assert_eq!(r["body"]["id"], 43);
            let r = decide(&http, monitor, &a, "approve", None).await;
            assert_eq!(r.status(), StatusCode::OK);
            a
        });
    let (err, r) = approved_call;
    assert!(!err, "approved call failed: {r}\n{}", logs());
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(deletes(&upstream, "/v2/pet/7"), 1);

    // Another DELETE is denied with a reason: the agent gets BLOCKED_BY_MONITOR and the
    // reason, the upstream gets nothing.
    let (denied_call, denial) =
        tokio::join!(call(&client, "api_execute", pet("deletePet", 8)), async {
            let a = pending_approval(&http, monitor, "deletePet", monitor_proc).await;
            assert_ne!(a["id"], approval["id"]);
            let reason = json!({"reason": "pet 8 stays"});
            let r = decide(&http, monitor, &a, "deny", Some(reason)).await;
            assert_eq!(r.status(), StatusCode::OK);
            a
        });
    let (err, r) = denied_call;
    assert!(err, "the denied call ran: {r}");
    assert_eq!(r["code"], "BLOCKED_BY_MONITOR", "{r}");
    assert_eq!(r["monitor"], "monitor", "{r}");
    let message = r["error"].as_str().unwrap();
    assert!(
        message.contains("denied by a person: pet 8 stays"),
        "{message}"
    );
    assert_eq!(deletes(&upstream, "/v2/pet/8"), 0);

    // The monitor recorded all three decisions, the denial with its approval id.
    let decisions: Value =
        crate::support::send_json(http.get(format!("{monitor}/api/decisions"))).await;
    let by: Vec<(&str, bool)> = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["tool"] == "api_execute")
        .map(|d| (d["by"].as_str().unwrap(), d["block"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        by,
        vec![
            ("default", false),
            ("default", false),
            ("approved", false),
            ("denied", true)
        ],
        "{decisions}"
    );
    let last = decisions.as_array().unwrap().last().unwrap();
    assert_eq!(last["approvalId"], denial["id"]);
    let approvals = crate::support::send_json(http.get(format!("{monitor}/api/approvals"))).await;
    assert_eq!(approvals, json!([]));
    client.cancel().await.unwrap();
}

/// Waits until the monitor holds no approval any more.
async fn no_pending_approvals(stack: &Stack) {
    for _ in 0..600 {
        if stack
            .get("/api/approvals")
            .await
            .as_array()
            .unwrap()
            .is_empty()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the cancelled call is still waiting for a person\n{}",
        stack.logs()
    );
}

#[tokio::test]
async fn a_call_the_agent_cancels_while_it_waits_never_runs() {
    let upstream = Upstream::start().await;
    let stack = Stack::start(&upstream, false).await;
    let client = mcp_client(&stack.mcp_url, &[("x-api-key", KEY)]).await;

    let params = CallToolRequestParams::new("api_execute").with_arguments(
        json!({"operationId": "deletePet", "pathParams": {"petId": 9}})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let held = stack.pending_delete().await;
    // MCP `notifications/cancelled`: the agent gives up on the call.
    handle
        .cancel(Some("the agent gave up".into()))
        .await
        .unwrap();
    // apigate stops waiting, so the monitor drops the approval as abandoned, and a late
    // approval cannot make it run.
    no_pending_approvals(&stack).await;
    abandoned_for_good(&stack, &held).await;

    // The session still works, and the upstream never saw the DELETE.
    execute_ok(&client, pet("getPetById", 9)).await;
    assert_eq!(deletes(&upstream, "/v2/pet/9"), 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn stateless_a_call_whose_client_goes_away_while_it_waits_never_runs() {
    let upstream = Upstream::start().await;
    let stack = Stack::start(&upstream, true).await;
    let client = mcp_client(&stack.mcp_url, &[("x-api-key", KEY)]).await;
    let peer = client.peer().clone();
    let waiting =
        tokio::spawn(async move { call(&peer, "api_execute", pet("deletePet", 9)).await });
    let held = stack.pending_delete().await;
    // The agent goes away: its HTTP request is dropped (a stateless server has no session
    // a cancellation could name).
    waiting.abort();
    no_pending_approvals(&stack).await;
    abandoned_for_good(&stack, &held).await;
    assert_eq!(deletes(&upstream, "/v2/pet/9"), 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_monitor_that_stops_blocks_the_waiting_call_and_every_later_one() {
    let upstream = Upstream::start().await;
    let mut stack = Stack::start(&upstream, false).await;
    let client = mcp_client(&stack.mcp_url, &[("x-api-key", KEY)]).await;

    let (waited, clean_exit) =
        tokio::join!(call(&client, "api_execute", pet("deletePet", 3)), async {
            stack.pending_delete().await;
            stack.monitor_proc.terminate().await
        });
    assert!(clean_exit, "{}", stack.logs());
    let (err, r) = waited;
    assert!(err, "the held call ran: {r}");
    assert_eq!(r["code"], "BLOCKED_BY_MONITOR");
    assert_eq!(r["monitor"], "monitor");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("the monitor is shutting down"),
        "{r}"
    );

    // Fail-closed: with the monitor gone, even a read is blocked.
    let (err, r) = call(&client, "api_execute", pet("getPetById", 3)).await;
    assert!(err, "a call ran without its monitor: {r}");
    assert_eq!(r["code"], "BLOCKED_BY_MONITOR");
    assert_eq!(r["monitor"], "unreachable", "{r}");
    assert!(upstream.requests().is_empty());
    client.cancel().await.unwrap();
}

/// The monitor recorded `held` as abandoned and refuses a late approval.
async fn abandoned_for_good(stack: &Stack, held: &Value) {
    let decisions = stack.get("/api/decisions").await;
    let last = decisions.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["approvalId"], held["id"], "{decisions}");
    assert_eq!(last["by"], "abandoned", "{decisions}");
    assert_eq!(last["block"], true);
    // … and a late approval cannot make it run.
    let late = decide(&stack.person, &stack.monitor, held, "approve", None).await;
    assert_eq!(late.status(), StatusCode::NOT_FOUND);
}

type Events = Arc<Mutex<Vec<String>>>;

/// A monitor that allows everything and keeps every event's raw body.
async fn recording_monitor() -> (String, Events) {
    let events: Events = Arc::default();
    let rec = events.clone();
    let app = Router::new().route(
        "/agent-monitor",
        post(move |body: String| {
            let rec = rec.clone();
            async move {
                let is_pre = serde_json::from_str::<Value>(&body)
                    .is_ok_and(|e| e["type"] == "tool.pre_execute");
                rec.lock().unwrap().push(body);
                if is_pre {
                    (StatusCode::OK, r#"{"block": false}"#)
                } else {
                    (StatusCode::OK, "OK")
                }
            }
        }),
    );
    let addr = crate::support::serve_app(app).await;
    (format!("http://{addr}"), events)
}

const UPSTREAM_SECRET: &str = "upstreamBearerSecret9f8e7d6c5b4a";
const SESSION_TOKEN: &str = "sess_4f3e2d1c0b9a8f7e6d5c4b3a29180716";
const HEADER_TOKEN: &str = "sess_headerTokenabcdef0123456789abcd";
const HEADER_API_KEY: &str = "apiKeyHeaderValue-77aa88bb99cc";
const BODY_PASSWORD: &str = "hunter2-body-password-secret";
const QUERY_PASSWORD: &str = "queryPasswordSecret-123xyz";
const PATH_SECRET: &str = "pathSegmentSecret-0xdeadbeef";
const SEARCH_SECRET: &str = "searchTermSecret-abcabc";

/// Every secret the events must never contain.
const SECRETS: [&str; 9] = [
    UPSTREAM_SECRET,
    SESSION_TOKEN,
    HEADER_TOKEN,
    HEADER_API_KEY,
    BODY_PASSWORD,
    QUERY_PASSWORD,
    PATH_SECRET,
    SEARCH_SECRET,
    KEY,
];

async fn leak_check(stateless: bool) {
    let upstream = Upstream::start().await;
    let (monitor, events) = recording_monitor().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.upstream_headers = vec![format!("Authorization: Bearer {UPSTREAM_SECRET}")];
    args.monitor.monitor = Some(monitor);
    let server = Server::start(args, stateless).await;
    let client = mcp_client(
        &server.url("/mcp"),
        &[("x-api-key", KEY), ("x-session-token", HEADER_TOKEN)],
    )
    .await;

    let calls = [
        (
            "api_discover",
            json!({"query": format!("delete a pet token={SEARCH_SECRET}"), "_sessionToken": SESSION_TOKEN}),
        ),
        (
            "api_schema",
            json!({"operationId": "deletePet", "_sessionToken": SESSION_TOKEN}),
        ),
        (
            "api_execute",
            json!({"operationId": "deletePet", "pathParams": {"petId": 7},
                   "headers": {"api_key": HEADER_API_KEY}, "_sessionToken": SESSION_TOKEN}),
        ),
        (
            "api_execute",
            json!({"operationId": "addPet", "_sessionToken": SESSION_TOKEN,
                   "body": {"name": "Rex", "photoUrls": [], "password": BODY_PASSWORD}}),
        ),
        (
            "api_execute",
            json!({"operationId": "loginUser",
                   "query": {"username": "bob", "password": QUERY_PASSWORD}}),
        ),
        (
            "api_execute",
            json!({"method": "get", "path": format!("/user/{PATH_SECRET}")}),
        ),
        (
            "api_execute",
            json!({"operationId": "addPet", "dryRun": true,
                   "body": {"name": "Rex", "photoUrls": [], "password": BODY_PASSWORD}}),
        ),
        // A failing call (the upstream answers 500) sends `session.error`.
        (
            "api_execute",
            json!({"operationId": "getPetById", "pathParams": {"petId": 500},
                   "_sessionToken": SESSION_TOKEN}),
        ),
    ];
    for (tool, arguments) in calls {
        let (err, r) = call(&client, tool, arguments.clone()).await;
        // petstore's `api_key` header is a credential, and one is configured: the agent's own
        // is refused before the monitor or the API sees anything (issue 42).
        let refused = arguments["headers"]["api_key"].is_string();
        let expect_err = arguments["pathParams"]["petId"] == 500 || refused;
        assert_eq!(err, expect_err, "{tool} {arguments}: {r}");
        if refused {
            assert_eq!(r["code"], "INVALID_ARGUMENTS", "{r}");
        }
    }
    // The upstream did get the credentials (so they were in play), the monitor did not.
    let got = upstream.requests();
    assert!(
        got.iter().any(|r| r.headers.get("authorization").unwrap()
            == format!("Bearer {UPSTREAM_SECRET}").as_str())
    );
    assert!(got.iter().any(|r| r.uri.contains(QUERY_PASSWORD)));
    assert!(
        got.iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains(BODY_PASSWORD))
    );
    client.cancel().await.unwrap();

    // The post-execute and error events are sent in the background: wait for them.
    let want = |events: &[String]| {
        let pre = events
            .iter()
            .filter(|e| e.contains("\"tool.pre_execute\""))
            .count();
        let post = events
            .iter()
            .filter(|e| e.contains("\"tool.post_execute\""))
            .count();
        let errors = events
            .iter()
            .filter(|e| e.contains("\"session.error\""))
            .count();
        pre == 7 && post == 6 && errors == 1
    };
    for _ in 0..600 {
        if want(&events.lock().unwrap()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = events.lock().unwrap().clone();
    assert!(want(&events), "events: {events:#?}");
    let mut previews = 0;
    for raw in &events {
        // An api_execute approval shows the request (the `preview`): its URL says which
        // resource the call touches, so a path value appears there and nowhere else.
        let mut event: Value = serde_json::from_str(raw).unwrap();
        if let Some(preview) = event.as_object_mut().and_then(|e| e.remove("preview")) {
            previews += 1;
            let mut preview = preview;
            let url = preview["url"].as_str().unwrap().to_string();
            assert!(url.starts_with(&upstream.url()), "{url}");
            preview["url"] = Value::String(url.replace(PATH_SECRET, "{path value}"));
            assert!(preview["method"].is_string(), "{preview}");
            event["preview"] = preview;
        }
        let e = event.to_string();
        for secret in SECRETS {
            assert!(!e.contains(secret), "{secret:?} leaked in {e}");
        }
        // Nothing credential-like under any other spelling either.
        let lower = e.to_lowercase();
        assert!(!lower.contains("bearer"), "{e}");
    }
    // One per api_execute call that reached the monitor.
    assert_eq!(previews, 5, "{events:#?}");
    drop(server);
}

#[tokio::test]
async fn no_token_or_credential_reaches_the_monitor_stateful() {
    leak_check(false).await;
}

#[tokio::test]
async fn no_token_or_credential_reaches_the_monitor_stateless() {
    leak_check(true).await;
}
