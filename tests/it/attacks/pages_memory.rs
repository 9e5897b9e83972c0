//! Issue 41, item 2: `pages` must not multiply memory, attacked for real: `apigate dev` as a
//! child process under an address-space limit (an unfixed server dies alone), an MCP client,
//! and an axum upstream whose every page is just under `--max-read-bytes` (16 MiB) of small
//! JSON items (the most a parse multiplies), with a `Link: rel="next"` to the following one.
//!
//! - `ten_big_pages_stop_at_the_call_budget`: `pages: 10` ends early, the result says where
//!   and why (`pages.stoppedBecause`), the server keeps answering, and its peak RSS stays
//!   within the call budget's order (printed for the report).
//! - `many_calls_at_once_stay_within_the_bytes_in_flight`: eight such calls at once, with a
//!   small `--max-bytes-in-flight`: each ends with a result (a budget reason where it stopped),
//!   never the process.

use axum::Router;
use axum::extract::Query;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use super::select::peak_kib;
use crate::support::{KEY, Proc, mcp_client, spawn_dev};

/// The most address space the server child may take.
const ADDRESS_SPACE: &str = "3000000000";

/// One page's bytes: just under the default `--max-read-bytes`.
const PAGE_BYTES: usize = 16 * 1024 * 1024 - 4096;

fn spec() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Big pages", "version": "1"},
        "servers": [{"url": "/api"}],
        "paths": {
            "/items": {"get": {"operationId": "listItems", "summary": "Pages of small items",
                "parameters": [{"name": "page", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "items"}}}}
        }
    })
}

/// `[{"i":1},{"i":1},…]`, `PAGE_BYTES` long.
fn page_body() -> bytes::Bytes {
    let item = br#"{"i":1},"#;
    let mut out = Vec::with_capacity(PAGE_BYTES);
    out.push(b'[');
    while out.len() + item.len() + 8 < PAGE_BYTES {
        out.extend_from_slice(item);
    }
    out.extend_from_slice(br#"{"i":1}]"#);
    out.into()
}

async fn start_upstream() -> String {
    let body = page_body();
    let app = Router::new().route(
        "/api/items",
        get(
            move |Query(q): Query<std::collections::HashMap<String, String>>| {
                let body = body.clone();
                async move {
                    let page: u32 = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
                    let next = format!("</api/items?page={}>; rel=\"next\"", page + 1);
                    (
                        [
                            (header::CONTENT_TYPE, "application/json".to_string()),
                            (header::LINK, next),
                        ],
                        body,
                    )
                        .into_response()
                }
            },
        ),
    );
    let addr = crate::support::serve_app(app).await;
    format!("http://{addr}")
}

async fn start_server(upstream: &str, extra: &[&str]) -> (Proc, String) {
    let spec = super::spec_file("pages", &spec());
    let (dev, url) = spawn_dev(&spec, Some(upstream), extra, &[]).await;
    let pid = dev.child.id().expect("the server runs").to_string();
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid, &format!("--as={ADDRESS_SPACE}")])
        .status()
        .expect("prlimit runs");
    assert!(limited.success(), "prlimit --pid {pid} failed");
    (dev, url)
}

/// `listItems` with `pages: 10`: the result, or why the call did not answer.
async fn ten_pages(
    client: &rmcp::service::Peer<rmcp::service::RoleClient>,
) -> Result<Value, String> {
    let args = json!({"operationId": "listItems", "query": {"page": "1"}, "pages": 10});
    let Value::Object(args) = args else {
        unreachable!()
    };
    let r = client
        .call_tool(rmcp::model::CallToolRequestParams::new("api_execute").with_arguments(args))
        .await
        .map_err(|e| e.to_string())?;
    Ok(r.structured_content.unwrap_or(Value::Null))
}

/// A result that stopped early and says it was a budget.
fn assert_stopped_by_a_budget(r: &Value) {
    let fetched = r["pages"]["fetched"].as_u64().unwrap_or(0);
    assert!((1..10).contains(&fetched), "{}", short(r));
    let why = r["pages"]["stoppedBecause"].as_str().unwrap_or_default();
    assert!(
        why.contains("budget") || why.contains("in flight"),
        "{}",
        short(r)
    );
}

fn short(v: &Value) -> String {
    let mut s = v.to_string();
    s.truncate(2000);
    s
}

#[tokio::test]
async fn ten_big_pages_stop_at_the_call_budget() {
    let upstream = start_upstream().await;
    let (mut dev, url) = start_server(&upstream, &[]).await;
    let pid = dev.child.id().expect("the server runs");
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    // The call's answer, or the server's end: whichever comes first.
    let r = tokio::select! {
        r = ten_pages(&client) => r,
        status = dev.child.wait() => panic!("the server died on one call: {status:?}\n{}", dev.log()),
    };
    assert!(dev.is_running(), "the server died\n{}", dev.log());
    let r = r.expect("the call answers");
    assert_stopped_by_a_budget(&r);
    eprintln!(
        "pages: 10 of {PAGE_BYTES} bytes: server peak RSS {} KiB; {}",
        peak_kib(pid),
        r["pages"]
    );
    // The server keeps answering.
    let again = ten_pages(&client).await.expect("the call answers");
    assert_stopped_by_a_budget(&again);
}

#[tokio::test]
async fn many_calls_at_once_stay_within_the_bytes_in_flight() {
    let upstream = start_upstream().await;
    let (mut dev, url) = start_server(&upstream, &["--max-bytes-in-flight", "300000000"]).await;
    let pid = dev.child.id().expect("the server runs");
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let peer = client.peer().clone();
            tokio::spawn(async move { ten_pages(&peer).await })
        })
        .collect();
    let all = async {
        let mut results = Vec::new();
        for c in calls {
            results.push(c.await.expect("the task ran"));
        }
        results
    };
    let results = tokio::select! {
        r = all => r,
        status = dev.child.wait() => panic!("the server died: {status:?}\n{}", dev.log()),
    };
    assert!(dev.is_running(), "the server died\n{}", dev.log());
    for r in &results {
        let r = r.as_ref().expect("each call answers");
        if r["code"].is_string() {
            // Refused before the first page: it names the budget.
            let e = r["error"].as_str().unwrap_or_default();
            assert!(e.contains("in flight"), "{}", short(r));
        } else {
            assert_stopped_by_a_budget(r);
        }
    }
    eprintln!("8 calls at once: server peak RSS {} KiB", peak_kib(pid));
}
