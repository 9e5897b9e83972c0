//! What an agent reads to get a task done: the ten everyday tasks of `tests/data/tasks.json`
//! against the fixture API (`fixture_api.rs`), with the real GitHub and Stripe specs, apigate in
//! process and a real MCP client. Each task runs twice: `plain`, as an agent had to before
//! `select`, `pages` and `next` (paging by hand, at the old 64 KiB budget), and `shaped`, with
//! them (at today's default budget). Both answers are checked against the fixture's own data,
//! and the bytes of text the agent reads are counted (the text block: what OpenCode gives the
//! model; Claude Code gives it the same JSON from `structuredContent`).
//!
//! `scripts/tasks.sh` prints the table (`cargo test --test it tasks:: -- --nocapture`).

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::fixture_api::{self, CHARGES, FixtureApi, ISSUES, RUNS};
use crate::support::{Server, engine_args, search, spec_path};

/// The budget every result had before issue 27.
const OLD_BUDGET: usize = 64 * 1024;

struct Outcome {
    calls: usize,
    bytes: usize,
    answer: Vec<Value>,
}

/// One `api_execute` call: (isError, structured result, bytes of its text).
async fn execute(client: &Peer<RoleClient>, args: &Value) -> (bool, Value, usize) {
    let Value::Object(map) = args.clone() else {
        panic!("arguments must be an object: {args}")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new("api_execute".to_string()).with_arguments(map))
        .await
        .expect("tools/call answers");
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    let value = result.structured_content.clone().unwrap_or(Value::Null);
    (result.is_error.unwrap_or(false), value, text)
}

/// Runs one plan's steps: every call, the bytes read, and the answers concatenated.
async fn run(client: &Peer<RoleClient>, plan: &Value) -> Outcome {
    let answer_of = plan["answer"].as_str().expect("answer");
    let mut out = Outcome {
        calls: 0,
        bytes: 0,
        answer: Vec::new(),
    };
    for step in plan["steps"].as_array().expect("steps") {
        let calls = step["calls"].as_u64().unwrap_or(1) as usize;
        let mut args = step["args"].clone();
        for i in 0..calls {
            let (error, result, bytes) = execute(client, &args).await;
            assert!(!error, "{args}: {result}");
            out.calls += 1;
            out.bytes += bytes;
            match search(answer_of, &result["body"]) {
                Value::Array(items) => out.answer.extend(items),
                Value::Null => {}
                other => out.answer.push(other),
            }
            if let Some(param) = step["pageParam"].as_str() {
                let page = args["query"][param].as_u64().expect("a page number");
                args["query"][param] = json!(page + 1);
            } else if let Some(param) = step["cursor"].as_str() {
                // As an agent pages Stripe by hand: after the last id it was shown, while the
                // list says (or, cut, might say) there is more.
                let body = &result["body"];
                let last = body["data"].as_array().and_then(|d| d.last());
                let more = body["has_more"].as_bool().unwrap_or(last.is_some());
                let Some(last) = last.filter(|_| more) else {
                    break;
                };
                args["query"][param] = last["id"].clone();
            } else if step["followNext"].as_bool() == Some(true) {
                match result.get("next") {
                    Some(next) if i + 1 < calls => args = next.clone(),
                    _ => break,
                }
            }
        }
    }
    out
}

/// The fixture's data, newest first, as the tasks' `expected` expressions read it.
fn fixture_data(owner: &str, repo: &str) -> Value {
    json!({
        "issues": (1..=ISSUES as u64).rev().map(|n| fixture_api::issue(owner, repo, n)).collect::<Vec<_>>(),
        "runs": (1..=RUNS as u64).rev().map(|n| fixture_api::workflow_run(owner, repo, n)).collect::<Vec<_>>(),
        "charges": (1..=CHARGES as u64).rev().map(fixture_api::charge).collect::<Vec<_>>(),
        "issue42": fixture_api::issue(owner, repo, 42),
        "charge7": fixture_api::charge(7),
    })
}

#[tokio::test]
async fn ten_tasks_cost_close_to_the_bytes_their_answers_need() {
    let tasks: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/data/tasks.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("tests/data/tasks.json"),
    )
    .expect("JSON");
    let (owner, repo) = (
        tasks["owner"].as_str().unwrap(),
        tasks["repo"].as_str().unwrap(),
    );
    let data = fixture_data(owner, repo);
    let api = FixtureApi::start().await;
    let mut servers = std::collections::HashMap::new();
    for spec in ["github-rest-3.0.json", "stripe.json"] {
        let mut before = engine_args(&spec_path(spec), Some(api.url()));
        before.max_response_bytes = OLD_BUDGET;
        let mut after = engine_args(&spec_path(spec), Some(api.url()));
        after.max_response_bytes = apigate::upstream::DEFAULT_MAX_BODY_BYTES;
        let before = Server::start(before, false).await;
        let after = Server::start(after, false).await;
        let clients = (before.client().await, after.client().await);
        servers.insert(spec, (before, after, clients));
    }

    let mut table = String::from(
        "| # | task | before: calls, bytes read, answer | after: calls, bytes read, answer | after ÷ before |\n|---|---|---|---|---|\n",
    );
    let (mut total_before, mut total_after) = (0, 0);
    for task in tasks["tasks"].as_array().unwrap() {
        let id = task["id"].as_u64().unwrap();
        let expected = match search(task["expected"].as_str().unwrap(), &data) {
            Value::Array(items) => items,
            other => panic!("task {id}: expected is not a list: {other}"),
        };
        let (_, _, (plain_client, shaped_client)) = &servers[task["spec"].as_str().unwrap()];
        let plain = run(plain_client, &task["plain"]).await;
        let shaped = run(shaped_client, &task["shaped"]).await;
        let verdict = |o: &Outcome| {
            if o.answer == expected {
                "complete".to_string()
            } else {
                format!(
                    "{} of {} items right",
                    o.answer
                        .iter()
                        .zip(&expected)
                        .take_while(|(a, b)| a == b)
                        .count(),
                    expected.len()
                )
            }
        };
        assert_eq!(
            shaped.answer, expected,
            "task {id} ({}): the shaped plan's answer is wrong",
            task["task"]
        );
        assert!(
            shaped.bytes < plain.bytes,
            "task {id}: {} bytes shaped, {} plain",
            shaped.bytes,
            plain.bytes
        );
        total_before += plain.bytes;
        total_after += shaped.bytes;
        table.push_str(&format!(
            "| {id} | {} | {}, {} B, {} | {}, {} B, {} | {:.3} |\n",
            task["task"].as_str().unwrap(),
            plain.calls,
            plain.bytes,
            verdict(&plain),
            shaped.calls,
            shaped.bytes,
            verdict(&shaped),
            shaped.bytes as f64 / plain.bytes as f64,
        ));
        // The issue's targets.
        match id {
            1 => assert!(
                shaped.calls <= 2 && shaped.bytes <= 16 * 1024,
                "113 titles: {} calls, {} bytes",
                shaped.calls,
                shaped.bytes
            ),
            2 => assert!(
                shaped.bytes <= 2 * 1024,
                "five runs: {} bytes",
                shaped.bytes
            ),
            _ => {}
        }
    }
    table.push_str(&format!(
        "| | all ten | {total_before} B | {total_after} B | {:.3} |\n",
        total_after as f64 / total_before as f64
    ));
    println!("{table}");
}

/// A page as large as the API gives (100 issues, 490 KB), at the default budget, comes back as
/// a result both clients put in front of the model whole: Claude Code replaces a result over
/// 50,000 characters with a file path and a 2 KB preview, OpenCode one over 51,200 bytes with
/// nothing but a file path (docs/responses.md).
#[tokio::test]
async fn a_full_page_at_the_default_budget_fits_what_both_clients_show() {
    let api = FixtureApi::start().await;
    let mut args = engine_args(&spec_path("github-rest-3.0.json"), Some(api.url()));
    args.max_response_bytes = apigate::upstream::DEFAULT_MAX_BODY_BYTES;
    let server = Server::start(args, false).await;
    let client = server.client().await;
    let (error, result, bytes) = execute(
        &client,
        &json!({"operationId": "issues/list-for-repo", "pathParams": {"owner": "octo", "repo": "hello"}, "query": {"per_page": 100}}),
    )
    .await;
    assert!(!error, "{result}");
    assert_eq!(result["truncated"], true);
    assert!(
        result["cut"]["shown"].as_u64().unwrap() >= 5,
        "{}",
        result["cut"]
    );
    assert!(result["next"].is_object(), "{result}");
    assert!(bytes < 50_000, "{bytes} bytes of text");
    assert!(
        serde_json::to_string(&result).unwrap().chars().count() < 50_000,
        "the structured form too"
    );
}
