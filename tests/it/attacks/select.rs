//! Issue 41, items 1 and 11: what one `select` expression can make apigate do, attacked for
//! real: `apigate dev` as a child process (under an address-space limit, so an unfixed server
//! dies alone instead of taking the machine), an MCP client, and an axum upstream that serves
//! a list, records the writes it receives and echoes its credential in pieces.
//!
//! - `a_select_bomb_is_refused_by_the_bytes_it_would_produce`: a 175-byte multi-select of ten
//!   `@` chained eight times with `|` (15 operators, under the old cap of 64) would copy the
//!   body 10^8 times when converted to JSON: it is refused with `INVALID_ARGUMENTS` naming the
//!   bytes it would produce, and the server keeps answering.
//! - `an_unknown_function_is_refused_before_the_request`: a POST with `select: nosuch(@)` is
//!   refused when the expression is compiled; the upstream never sees the POST.
//! - `select_cannot_rebuild_a_scrubbed_credential`: `join('', pieces)` and `reverse(…)` of an
//!   echoed credential come back `[redacted]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::support::{KEY, Proc, execute_ok, mcp_client, spawn_dev};

const TOKEN: &str = "sk_live_S3lectPieceZ9xQw7LmT4vB";

/// The most address space the server child may take (the unfixed server aborts under it).
const ADDRESS_SPACE: &str = "3000000000";

fn spec() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Select attacks", "version": "1"},
        "servers": [{"url": "/api"}],
        "paths": {
            "/items": {"get": {"operationId": "listItems", "summary": "A list of items",
                "responses": {"200": {"description": "items"}}}},
            "/things": {"post": {"operationId": "createThing", "summary": "Create a thing",
                "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"description": "created"}}}},
            "/echo": {"get": {"operationId": "echoPieces",
                "summary": "Echo the credential in pieces",
                "responses": {"200": {"description": "pieces"}}}}
        }
    })
}

/// The upstream: 200 items, a POST counter, and the credential echoed in 4-character pieces
/// and reversed.
async fn start_upstream() -> (String, Arc<AtomicUsize>) {
    let posts = Arc::new(AtomicUsize::new(0));
    let counted = posts.clone();
    let items: Vec<Value> = (0..200)
        .map(|i| json!({"id": i, "name": format!("item {i}")}))
        .collect();
    let app = Router::new()
        .route("/api/items", get(move || async move { axum::Json(items) }))
        .route(
            "/api/things",
            post(move || async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({"created": true}))
            }),
        )
        .route(
            "/api/echo",
            get(|headers: HeaderMap| async move {
                let auth = crate::support::header_text(&headers, "authorization");
                let token = auth.trim_start_matches("Bearer ").to_string();
                let chars: Vec<char> = token.chars().collect();
                let pieces: Vec<String> = chars.chunks(4).map(|c| c.iter().collect()).collect();
                let reversed: String = chars.iter().rev().collect();
                axum::Json(json!({"pieces": pieces, "reversed": reversed}))
            }),
        );
    let addr = crate::support::serve_app(app).await;
    (format!("http://{addr}"), posts)
}

/// `apigate dev` against the upstream with the credential, its address space limited.
async fn start_server(upstream: &str) -> (Proc, String) {
    let spec = super::spec_file("select", &spec());
    let header = format!("Authorization: Bearer {TOKEN}");
    let (dev, url) = spawn_dev(&spec, Some(upstream), &["--upstream-header", &header], &[]).await;
    let pid = dev.child.id().expect("the server runs").to_string();
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid, &format!("--as={ADDRESS_SPACE}")])
        .status()
        .expect("prlimit runs");
    assert!(limited.success(), "prlimit --pid {pid} failed");
    (dev, url)
}

/// Peak resident memory of a process, in KiB (`VmHWM`).
pub(super) fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_select_bomb_is_refused_by_the_bytes_it_would_produce() {
    let (upstream, _) = start_upstream().await;
    let (mut dev, url) = start_server(&upstream).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let ten = format!("[{}]", ["@"; 10].join(","));
    let bomb = [ten.as_str(); 8].join("|");
    assert_eq!(bomb.len(), 175, "{bomb}");
    // Under the old cap: 8 brackets and 7 pipes.
    assert!(bomb.matches(['[', '|']).count() <= 64);
    let args = json!({"operationId": "listItems", "select": bomb});
    let Value::Object(args) = args else {
        unreachable!()
    };
    let pid = dev.child.id();
    let call = client.call_tool(CallToolRequestParams::new("api_execute").with_arguments(args));
    // The call's answer, or the server's end: whichever comes first.
    let answer = tokio::select! {
        answer = call => answer,
        status = dev.child.wait() => panic!("the server died on one select: {status:?}\n{}", dev.log()),
    };
    assert!(dev.is_running(), "the server died\n{}", dev.log());
    let result = answer.expect("tools/call answers");
    let shown = result.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(result.is_error, Some(true), "{shown}");
    assert_eq!(shown["code"], "INVALID_ARGUMENTS", "{shown}");
    let message = shown["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("the selection would produce more than"),
        "{message}"
    );
    // The server keeps answering, the same select of a little works.
    let ok = execute_ok(
        &client,
        json!({"operationId": "listItems", "select": "[0].name"}),
    )
    .await;
    assert_eq!(ok["body"], "item 0", "{ok}");
    if let Some(pid) = pid {
        eprintln!("select bomb: server peak RSS {} KiB", peak_kib(pid));
    }
}

#[tokio::test]
async fn an_unknown_function_or_arity_is_refused_before_the_request() {
    let (upstream, posts) = start_upstream().await;
    let (_dev, url) = start_server(&upstream).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    for (select, says) in [
        ("nosuch(@)", "unknown function"),
        (
            "items[?starts_with(name, 'a')].{n: eval(name)}",
            "unknown function",
        ),
        // The wrong number of arguments is known before the request too (the red team's
        // instances: each POST was sent, then the agent got INVALID_ARGUMENTS).
        ("length(@, @)", "length() takes 1 argument, not 2"),
        ("sort_by(@)", "sort_by() takes 2 arguments, not 1"),
        ("to_number(`1`, `2`)", "to_number() takes 1 argument, not 2"),
    ] {
        let args = json!({"operationId": "createThing", "body": {"a": 1}, "select": select});
        let r = crate::support::execute_err(&client, args, "INVALID_ARGUMENTS").await;
        let message = r["error"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{select}: {message}");
    }
    assert_eq!(
        posts.load(Ordering::SeqCst),
        0,
        "the POST reached the upstream"
    );
    // A known function still runs after the request.
    let args = json!({"operationId": "createThing", "body": {"a": 1}, "select": "keys(@)"});
    let ok = execute_ok(&client, args).await;
    assert_eq!(ok["body"], json!(["created"]), "{ok}");
    assert_eq!(posts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn select_cannot_rebuild_a_scrubbed_credential() {
    let (upstream, _) = start_upstream().await;
    let (_dev, url) = start_server(&upstream).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    // The pieces pass the scrubber alone.
    let plain = execute_ok(&client, json!({"operationId": "echoPieces"})).await;
    assert!(
        plain["body"]["pieces"]
            .as_array()
            .is_some_and(|p| p.len() > 4),
        "{plain}"
    );
    for select in [
        "join('', pieces)",
        "reverse(reversed)",
        "{token: join('', pieces), n: length(pieces)}",
        "[join('', pieces)]",
        "join('', ['Bearer ', join('', pieces)])",
        "reverse(join('', reverse(pieces[].reverse(@))))",
    ] {
        let args = json!({"operationId": "echoPieces", "select": select});
        let (_, shown, text) = crate::support::call_shown(&client, "api_execute", args).await;
        assert!(!text.contains(TOKEN), "{select}: {text}");
        assert!(text.contains("[redacted]"), "{select}: {shown}");
    }
}
