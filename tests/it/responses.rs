//! Responses an agent can use (issue 27): `select`, cuts of whole items that keep the
//! envelope, `next` and `pages`, against the realistic fixture API (`fixture_api.rs`) with the
//! real GitHub and Stripe specs, apigate in process and a real MCP client.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::fixture_api::{self, CHARGES, FixtureApi, ISSUES};
use crate::support::{Server, engine_args, spec_path};

const ISSUES_OP: &str = "issues/list-for-repo";

async fn serve(spec: &str, api: &FixtureApi) -> Server {
    Server::start(engine_args(&spec_path(spec), Some(api.url())), false).await
}

/// Calls `api_execute`; returns (isError, structured result, bytes of the text the agent reads).
async fn execute(client: &Peer<RoleClient>, args: Value) -> (bool, Value, usize) {
    let Value::Object(map) = args else {
        panic!("arguments must be an object")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new("api_execute".to_string()).with_arguments(map))
        .await
        .expect("tools/call answers");
    let text: usize = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    (
        result.is_error.unwrap_or(false),
        result.structured_content.clone().unwrap_or(Value::Null),
        text,
    )
}

fn issues_args(query: Value) -> Value {
    json!({"operationId": ISSUES_OP, "pathParams": {"owner": "octo", "repo": "hello"}, "query": query})
}

#[tokio::test]
async fn a_cut_list_keeps_whole_items_and_its_envelope() {
    let api = FixtureApi::start().await;
    let server = serve("github-rest-3.0.json", &api).await;
    let client = server.client().await;
    let (err, r, text) = execute(&client, issues_args(json!({"per_page": 100}))).await;
    assert!(!err, "{r}");
    assert_eq!(r["truncated"], true);
    let items = r["body"].as_array().expect("a list");
    assert_eq!(r["cut"]["pointer"], "");
    assert_eq!(r["cut"]["total"], 100);
    assert_eq!(r["cut"]["shown"], items.len());
    assert!(items.len() >= 10, "{}", items.len());
    // Whole items only: each exactly the API's object.
    for (i, item) in items.iter().enumerate() {
        assert_eq!(
            item,
            &fixture_api::issue("octo", "hello", (ISSUES - i) as u64)
        );
    }
    let note = r["note"].as_str().unwrap();
    assert!(note.contains("select"), "{note}");
    // `next` starts at the first issue not shown: the same page, the ones shown skipped.
    assert_eq!(
        r["next"]["query"],
        json!({"per_page": 100}),
        "{}",
        r["next"]
    );
    assert_eq!(r["next"]["skipItems"], json!(items.len()), "{}", r["next"]);
    // Before: the first 64 KiB of the page's bytes, cut at a valid JSON boundary (the
    // path every body took until now, `shown_body`), whose last issue is partial.
    let page: Vec<Value> = (0..100)
        .map(|i| fixture_api::issue("octo", "hello", (ISSUES - i) as u64))
        .collect();
    let raw = serde_json::to_vec(&page).unwrap();
    let budget = 64 * 1024;
    let before = apigate::upstream::shown_body(
        &raw[..budget],
        true,
        Some("application/json; charset=utf-8"),
        budget,
        &Default::default(),
    );
    let before_items = before.as_array().unwrap();
    let partial = before_items.last().unwrap();
    assert_ne!(
        partial,
        &page[before_items.len() - 1],
        "the old cut ends in a partial issue"
    );
    println!(
        "a 100-issue page: before {} issues (the last partial), body {} bytes; after {} whole \
         issues, body {} bytes, result text {text} bytes",
        before_items.len(),
        before.to_string().len(),
        items.len(),
        r["body"].to_string().len()
    );

    // Workflow runs: `total_count` stays beside the cut list.
    let (err, r, _) = execute(
        &client,
        json!({"operationId": "actions/list-workflow-runs-for-repo",
               "pathParams": {"owner": "octo", "repo": "hello"}, "query": {"per_page": 30}}),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(r["body"]["total_count"], fixture_api::RUNS);
    assert_eq!(r["cut"]["pointer"], "/workflow_runs");
    let runs = r["body"]["workflow_runs"].as_array().unwrap();
    assert_eq!(r["cut"]["shown"], runs.len());
    assert_eq!(
        runs[0],
        fixture_api::workflow_run("octo", "hello", fixture_api::RUNS as u64)
    );
    // Five runs' status and conclusion, selected.
    let (_, r, text) = execute(
        &client,
        json!({"operationId": "actions/list-workflow-runs-for-repo",
               "pathParams": {"owner": "octo", "repo": "hello"}, "query": {"per_page": 5},
               "select": "workflow_runs[].{id: id, status: status, conclusion: conclusion}"}),
    )
    .await;
    assert_eq!(r["body"].as_array().unwrap().len(), 5, "{r}");
    println!("five workflow runs' status and conclusion: {text} bytes of text");

    // Stripe: `has_more` and `url` come after `data` and stay; `next` resumes after the last
    // charge shown, so nothing is skipped.
    let server = serve("stripe.json", &api).await;
    let client = server.client().await;
    let (err, r, _) = execute(
        &client,
        json!({"operationId": "GetCharges", "query": {"limit": 100}}),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(r["cut"]["pointer"], "/data");
    assert_eq!(r["cut"]["total"], 100);
    assert_eq!(r["body"]["has_more"], true);
    assert_eq!(r["body"]["url"], "/v1/charges");
    assert_eq!(r["body"]["object"], "list");
    let data = r["body"]["data"].as_array().unwrap();
    assert_eq!(r["cut"]["shown"], data.len());
    let last = data.last().unwrap()["id"].clone();
    assert_eq!(r["next"]["query"]["starting_after"], last);
    assert!(r["note"].as_str().unwrap().contains("right after"), "{r}");
    let (_, r2, _) = execute(&client, r["next"].clone()).await;
    let first = &r2["body"]["data"][0];
    assert_eq!(
        first,
        &fixture_api::charge((CHARGES - data.len()) as u64),
        "the next page starts right after the last charge shown"
    );
}

/// Follows `next` from the first page to the end; returns every item's key, in order.
async fn walk(client: &Peer<RoleClient>, mut args: Value, key: &str, list: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    for _ in 0..100 {
        let (err, r, _) = execute(client, args.clone()).await;
        assert!(!err, "{r}");
        assert!(r.get("cut").is_none(), "this page size fits: {r}");
        let items = r["body"].pointer(list).and_then(Value::as_array).unwrap();
        seen.extend(items.iter().map(|i| i[key].clone()));
        match r.get("next") {
            Some(n) => args = n.clone(),
            None => return seen,
        }
    }
    panic!("more than 100 pages")
}

#[tokio::test]
async fn next_fetches_exactly_the_following_page() {
    let api = FixtureApi::start().await;
    let server = serve("github-rest-3.0.json", &api).await;
    let client = server.client().await;
    let numbers = walk(
        &client,
        issues_args(json!({"per_page": 10, "state": "all"})),
        "number",
        "",
    )
    .await;
    let expected: Vec<Value> = (1..=ISSUES as u64).rev().map(Value::from).collect();
    assert_eq!(numbers, expected, "every issue once, in order");
    // The Link was mapped back to the operation's query: every request stayed on the path.
    let pages: Vec<String> = api.requests();
    assert_eq!(pages.len(), ISSUES.div_ceil(10));
    assert!(
        pages
            .iter()
            .all(|p| p.starts_with("GET /repos/octo/hello/issues?")),
        "{pages:?}"
    );

    let server = serve("stripe.json", &api).await;
    let client = server.client().await;
    let ids = walk(
        &client,
        json!({"operationId": "GetCharges", "query": {"limit": 25}}),
        "id",
        "/data",
    )
    .await;
    assert_eq!(ids.len(), CHARGES);
    let unique: BTreeSet<String> = ids
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(unique.len(), CHARGES, "no charge twice");
    assert_eq!(ids[0], fixture_api::charge(CHARGES as u64)["id"]);
    assert_eq!(ids[CHARGES - 1], fixture_api::charge(1)["id"]);
}

#[tokio::test]
async fn pages_with_select_return_every_title_in_one_small_result() {
    let api = FixtureApi::start().await;
    let server = serve("github-rest-3.0.json", &api).await;
    let client = server.client().await;
    let mut args = issues_args(json!({"per_page": 30}));
    args["pages"] = json!(4);
    args["select"] = json!("[].{number: number, title: title}");
    let (err, r, text) = execute(&client, args).await;
    assert!(!err, "{r}");
    let items = r["body"].as_array().unwrap();
    assert_eq!(items.len(), ISSUES);
    for (i, item) in items.iter().enumerate() {
        let n = (ISSUES - i) as u64;
        assert_eq!(
            item,
            &json!({"number": n, "title": fixture_api::issue("octo", "hello", n)["title"]})
        );
    }
    assert_eq!(r["pages"], json!({"fetched": 4}));
    assert!(r.get("next").is_none(), "page 4 was the last: {r}");
    assert_eq!(r["truncated"], false);
    assert!(text < 16 * 1024, "{text} bytes");
    assert_eq!(api.requests().len(), 4);
    println!("113 titles with pages: 4 and select: {text} bytes of text");

    // Fewer pages than the list has: `next` continues after the last one fetched.
    let mut args = issues_args(json!({"per_page": 20}));
    args["pages"] = json!(2);
    args["select"] = json!("[].number");
    let (_, r, _) = execute(&client, args).await;
    assert_eq!(r["body"].as_array().unwrap().len(), 40);
    assert_eq!(r["next"]["query"]["page"], 3);
    assert_eq!(r["next"]["pages"], 2);
    assert_eq!(r["next"]["select"], "[].number");
    // Stripe's cursor the same way, with a filter.
    let server = serve("stripe.json", &api).await;
    let client = server.client().await;
    let (err, r, _) = execute(
        &client,
        json!({"operationId": "GetCharges", "query": {"limit": 50}, "pages": 3,
               "select": "data[?amount > `25000`].id"}),
    )
    .await;
    assert!(!err, "{r}");
    // Charges of more than 25000 cents are numbers 101 to 113.
    assert_eq!(r["body"].as_array().unwrap().len(), 13, "{r}");
    assert_eq!(r["pages"], json!({"fetched": 3}));
}

#[tokio::test]
async fn select_that_matches_nothing_says_so() {
    let api = FixtureApi::start().await;
    let server = serve("github-rest-3.0.json", &api).await;
    let client = server.client().await;
    let mut args = issues_args(json!({"per_page": 5}));
    args["select"] = json!("items[].title");
    let (err, r, _) = execute(&client, args).await;
    assert!(!err, "{r}");
    assert_eq!(r["body"], Value::Null);
    assert!(
        r["note"].as_str().unwrap().contains("matched nothing"),
        "{r}"
    );
    // api_schema teaches `select` with the body's own fields.
    let (err, schema) =
        crate::support::call(&client, "api_schema", json!({"operationId": ISSUES_OP})).await;
    assert!(!err, "{schema}");
    let lesson = schema["select"].as_str().unwrap();
    assert_eq!(lesson, "[].{number: number, title: title}");
    println!("api_schema's select example: {lesson}");
}

#[tokio::test]
async fn bad_select_and_pages_are_refused_before_any_request() {
    let api = FixtureApi::start().await;
    let server = serve("stripe.json", &api).await;
    let client = server.client().await;
    let cases = [
        (
            json!({"operationId": "GetCharges", "select": "data[?amount > "}),
            "/select",
            "character",
        ),
        (
            json!({"operationId": "GetCharges", "select": format!("data[].{}", "a".repeat(2000))}),
            "/select",
            "",
        ),
        (
            json!({"operationId": "GetCharges", "pages": 11}),
            "/pages",
            "--max-pages",
        ),
        (
            json!({"operationId": "GetCharges", "pages": 0}),
            "/pages",
            "",
        ),
        (
            json!({"operationId": "PostCharges", "body": {"amount": 100, "currency": "usd"}, "pages": 2}),
            "/pages",
            "GET only",
        ),
    ];
    for (args, pointer, says) in cases {
        let (err, r, _) = execute(&client, args.clone()).await;
        assert!(err, "{args}: {r}");
        assert_eq!(r["code"], "INVALID_ARGUMENTS", "{args}: {r}");
        let v = r["violations"].as_array().unwrap();
        assert!(v.iter().any(|v| v["pointer"] == pointer), "{args}: {r}");
        assert!(r.to_string().contains(says), "{args}: {r}");
    }
    assert_eq!(
        api.requests(),
        Vec::<String>::new(),
        "the API saw no request"
    );
}

/// A monitor that records each `tool.pre_execute` and blocks the `block_at`-th.
async fn counting_monitor(block_at: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let rec = seen.clone();
    let app = Router::new().route(
        "/agent-monitor",
        post(move |body: String| {
            let rec = rec.clone();
            async move {
                let event: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                if event["type"] != "tool.pre_execute" {
                    return (StatusCode::OK, "OK".to_string());
                }
                let mut seen = rec.lock().unwrap();
                seen.push(event);
                let block = seen.len() == block_at;
                (
                    StatusCode::OK,
                    json!({"block": block, "reason": "third page"}).to_string(),
                )
            }
        }),
    );
    let addr = crate::support::serve_app(app).await;
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn a_monitor_sees_each_page_and_can_stop_it() {
    let api = FixtureApi::start().await;
    let (monitor, seen) = counting_monitor(3).await;
    let mut args = engine_args(&spec_path("github-rest-3.0.json"), Some(api.url()));
    args.monitor.monitor = Some(monitor);
    let server = Server::start(args, false).await;
    let client = server.client().await;
    let mut call = issues_args(json!({"per_page": 30}));
    call["pages"] = json!(4);
    call["select"] = json!("[].number");
    let (err, r, _) = execute(&client, call).await;
    assert!(!err, "{r}");
    let events = seen.lock().unwrap().clone();
    assert_eq!(events.len(), 3, "one gate per page: {events:?}");
    // Each gate shows the request of its page.
    let urls: Vec<&str> = events
        .iter()
        .map(|e| e["preview"]["url"].as_str().unwrap_or_default())
        .collect();
    assert!(!urls[0].contains("&page="), "{urls:?}");
    assert!(
        urls[1].ends_with("&page=2") && urls[2].ends_with("&page=3"),
        "{urls:?}"
    );
    // Two pages got through; the third was blocked and not sent.
    assert_eq!(api.requests().len(), 2);
    assert_eq!(r["body"].as_array().unwrap().len(), 60);
    assert_eq!(r["pages"]["fetched"], 2);
    let why = r["pages"]["stoppedBecause"].as_str().unwrap();
    assert!(
        why.contains("page 3") && why.contains("BLOCKED_BY_MONITOR"),
        "{why}"
    );
    assert_eq!(r["next"]["query"]["page"], 3, "{r}");
}

#[tokio::test]
async fn select_sees_only_the_scrubbed_body() {
    // The petstore upstream echoes the user name; the configured credential is
    // `Authorization: Bearer upstream-secret-token` (support::engine_args).
    let upstream = crate::support::Upstream::start().await;
    let server = Server::start(
        engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url())),
        false,
    )
    .await;
    let client = server.client().await;
    for select in ["username", "[username, length(username)]", "to_string(@)"] {
        let (err, r, _) = execute(
            &client,
            json!({"operationId": "getUserByName", "pathParams": {"username": "upstream-secret-token"},
                   "select": select}),
        )
        .await;
        assert!(!err, "{r}");
        let text = r.to_string();
        assert!(text.contains("[redacted]"), "{select}: {text}");
        assert!(!text.contains("secret-token"), "{select}: {text}");
    }
}

#[tokio::test]
async fn a_body_over_the_read_budget_keeps_the_prefix_cut() {
    let api = FixtureApi::start().await;
    let mut args = engine_args(&spec_path("github-rest-3.0.json"), Some(api.url()));
    args.max_read_bytes = 100 * 1024;
    args.max_response_bytes = 16 * 1024;
    let server = Server::start(args, false).await;
    let client = server.client().await;
    // 100 issues are about 500 KB: read to 100 KiB, then shown within 16 KiB.
    let (err, r, _) = execute(&client, issues_args(json!({"per_page": 100}))).await;
    assert!(!err, "{r}");
    assert_eq!(r["truncated"], true);
    assert!(r.get("cut").is_none(), "{r}");
    assert!(
        r.get("next").is_none(),
        "no page is guessed from a cut body: {r}"
    );
    assert!(
        r["note"].as_str().unwrap().contains("--max-read-bytes"),
        "{r}"
    );
    let items = r["body"].as_array().unwrap();
    assert!(!items.is_empty() && r["body"].to_string().len() <= 16 * 1024);
    assert_eq!(items[0], fixture_api::issue("octo", "hello", ISSUES as u64));
    // A select still runs, over what was read (about 20 issues).
    let mut call = issues_args(json!({"per_page": 100}));
    call["select"] = json!("[].number");
    let (_, r, _) = execute(&client, call).await;
    let n = r["body"].as_array().unwrap().len();
    assert!((15..30).contains(&n), "{n}: {r}");
    assert_eq!(r["truncated"], true);
}

/// A cut GitHub page (page numbers, not a cursor): `next` starts right after the last issue
/// shown, by a page size that puts a page boundary there, so following it from a first page of
/// 100 that shows only a few sees every issue exactly once (the old `page=2` skipped the rest).
#[tokio::test]
async fn next_after_a_cut_page_skips_nothing() {
    let api = FixtureApi::start().await;
    let server = serve("github-rest-3.0.json", &api).await;
    let client = server.client().await;
    let mut args = issues_args(json!({"per_page": 100}));
    let mut seen = Vec::new();
    let mut cuts = 0;
    for _ in 0..40 {
        let (err, r, _) = execute(&client, args.clone()).await;
        assert!(!err, "{r}");
        cuts += usize::from(r.get("cut").is_some());
        if r.get("cut").is_some() {
            assert!(r["note"].as_str().unwrap().contains("right after"), "{r}");
        }
        seen.extend(
            r["body"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["number"].clone()),
        );
        match r.get("next") {
            Some(n) => args = n.clone(),
            None => break,
        }
    }
    assert!(cuts >= 1, "the first page is cut");
    let expected: Vec<Value> = (1..=ISSUES as u64).rev().map(Value::from).collect();
    assert_eq!(seen, expected);
}
