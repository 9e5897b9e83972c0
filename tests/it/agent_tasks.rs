//! What a skilled agent reads to get twelve everyday tasks done over five APIs (issue 42): the
//! tasks of `tests/data/agent-tasks.json` against one apigate serving GitHub, Stripe, Slack,
//! Spotify and Kubernetes (their real specs, one `[[api]]` each in one config file, as a
//! deployment that gives an agent several APIs runs one server: one set of three tools, and
//! discovery across them all), each API's upstream the local `five_apis.rs`. Each task is
//! done as a skilled agent does it: `api_discover` with a natural query, `api_schema` of the
//! operation it picks among the hits it was shown, `api_execute` with `select` (and `pages`
//! where the answer spans pages). Every answer is checked against the fixture's data, and the
//! bytes of every result the model reads are counted: the text block (what OpenCode gives the
//! model) and the compact JSON of `structuredContent` (what Claude Code gives it;
//! docs/responses.md), which must be the same bytes.
//!
//! `scripts/agent-tasks.sh` prints the table (`cargo test --test it agent_tasks:: --
//! --nocapture`).

use std::os::unix::fs::PermissionsExt;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::five_apis::FiveApis;
use crate::support::{Server, engine_args, spec_path};

/// A header an upstream is given: name, value.
type Credential = (&'static str, &'static str);

/// The five APIs: name, spec, and the credentials their upstream is given. Slack's spec
/// declares its `token` a required header parameter: the operator supplies it.
const APIS: [(&str, &str, &[Credential]); 5] = [
    (
        "github",
        "github-rest-3.0.json",
        &[("Authorization", "token ghp_github-secret-0123456789")],
    ),
    (
        "stripe",
        "stripe.json",
        &[("Authorization", "Bearer sk_test_stripe-secret-abcdef")],
    ),
    (
        "slack",
        "slack-web-swagger2.json",
        &[
            ("Authorization", "Bearer xoxb-slack-secret-0123456789"),
            ("token", "xoxb-slack-secret-0123456789"),
        ],
    ),
    (
        "spotify",
        "spotify.json",
        &[("Authorization", "Bearer spotify-secret-token-0123456789")],
    ),
    (
        "kubernetes",
        "kubernetes-1.13-swagger2.json",
        &[("Authorization", "Bearer k8s-service-account-token-0123")],
    ),
];

/// One apigate over the five APIs (a config file with one `[[api]]` each, credentials in
/// files of mode 600), each API's upstream `upstream`.
pub struct FiveServer {
    pub server: Server,
    _dir: tempfile::TempDir,
}

impl FiveServer {
    pub async fn start(upstream: &str) -> FiveServer {
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::new();
        for (name, spec, headers) in APIS {
            let mut refs = Vec::new();
            for (header, secret) in headers {
                let file = format!("{name}-{header}.secret");
                let path = dir.path().join(&file);
                std::fs::write(&path, format!("{secret}\n")).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
                refs.push(format!("{header} = \"file:{file}\""));
            }
            config.push_str(&format!(
                "[[api]]\nname = \"{name}\"\nspec = \"{}\"\nupstream = \"{upstream}\"\n\
                 upstream-headers = {{ {} }}\n\n",
                spec_path(spec),
                refs.join(", ")
            ));
        }
        let path = dir.path().join("apigate.toml");
        std::fs::write(&path, config).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut args = engine_args("", None);
        args.spec = None;
        args.upstream_headers.clear();
        args.config = Some(path);
        args.max_response_bytes = apigate::upstream::DEFAULT_MAX_BODY_BYTES;
        FiveServer {
            server: Server::start(args, true).await,
            _dir: dir,
        }
    }
}

/// One tool call as the model reads it.
pub struct Read {
    pub error: bool,
    pub value: Value,
    /// Bytes of the text block (OpenCode).
    pub text: usize,
    /// Bytes of `structuredContent` as compact JSON (Claude Code).
    pub structured: usize,
}

/// Calls `tool` and counts what the model reads of its result.
pub async fn read(client: &Peer<RoleClient>, tool: &str, args: &Value) -> Read {
    let Value::Object(map) = args.clone() else {
        panic!("arguments must be an object: {args}")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(map))
        .await
        .expect("tools/call answers");
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    let value = result.structured_content.clone().unwrap_or(Value::Null);
    // `AGENT_TASKS_SHOW=1`: what the model reads, call by call.
    if std::env::var_os("AGENT_TASKS_SHOW").is_some() {
        println!("→ {tool} {args}\n← {value}\n");
    }
    Read {
        error: result.is_error.unwrap_or(false),
        structured: serde_json::to_string(&value).unwrap().len(),
        value,
        text,
    }
}

fn search(expression: &str, data: &Value) -> Value {
    let compiled = jmespath::compile(expression)
        .unwrap_or_else(|e| panic!("{expression:?} is not JMESPath: {e}"));
    let found = compiled
        .search(jmespath::Variable::try_from(data).expect("JSON"))
        .unwrap_or_else(|e| panic!("{expression:?} failed: {e}"));
    serde_json::to_value(&*found).expect("JSON")
}

/// The field names a `select` starts from (`items[?…].{…}` → `items`; `{a: a, b: b.c}` → `a`,
/// `b`; `[].{n: number}` → `number`): what the agent had to learn from `api_schema`'s
/// response view.
fn select_roots(select: &str) -> Vec<String> {
    let first = |s: &str| {
        s.trim()
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let mut s = select.trim();
    if let Some(rest) = s.strip_prefix("[]") {
        s = rest.trim_start_matches('.');
    }
    let roots = match s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        Some(fields) => fields
            .split(',')
            .filter_map(|kv| kv.split_once(':').map(|(_, v)| first(v)))
            .collect(),
        None => vec![first(s)],
    };
    roots.into_iter().filter(|r| !r.is_empty()).collect()
}

/// Whether `name` appears as a key anywhere in `v`.
fn has_key(v: &Value, name: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(name) || m.values().any(|c| has_key(c, name)),
        Value::Array(a) => a.iter().any(|c| has_key(c, name)),
        // A compact outline names fields in text.
        Value::String(s) => s
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == name),
        _ => false,
    }
}

/// One task's outcome.
struct Done {
    calls: usize,
    discover: usize,
    schema: usize,
    execute: usize,
    /// The same results' `structuredContent`, compact (Claude Code).
    structured: usize,
    rank: usize,
    hits: usize,
    /// Every field `select` starts from is named in the response view `api_schema` showed.
    fields_shown: bool,
    answer: Vec<Value>,
}

async fn run(client: &Peer<RoleClient>, task: &Value) -> Done {
    let id = &task["id"];
    let mut done = Done {
        calls: 0,
        discover: 0,
        schema: 0,
        execute: 0,
        structured: 0,
        rank: 0,
        hits: 0,
        fields_shown: true,
        answer: Vec::new(),
    };
    // 1. Discover, and pick the operation among the hits shown.
    let found = read(client, "api_discover", &task["discover"]).await;
    assert!(!found.error, "task {id}: {}", found.value);
    done.calls += 1;
    done.discover += found.text;
    done.structured += found.structured;
    let pick = task["pick"].as_str().unwrap();
    let hits = found.value["results"].as_array().unwrap();
    done.hits = hits.len();
    done.rank = 1 + hits
        .iter()
        .position(|h| h["operationId"] == pick)
        .unwrap_or_else(|| {
            panic!(
                "task {id}: {pick} is not among the hits of {}: {}",
                task["discover"], found.value
            )
        });
    // 2. Its schema: every parameter and body field the call uses must be in it.
    let mut schema_args = task.get("schema").cloned().unwrap_or(json!({}));
    schema_args["operationId"] = json!(pick);
    let schema = read(client, "api_schema", &schema_args).await;
    assert!(!schema.error, "task {id}: {}", schema.value);
    done.calls += 1;
    done.schema += schema.text;
    done.structured += schema.structured;
    let names = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    // 3. The calls.
    let answer_of = task["answer"].as_str().unwrap();
    for call in task["execute"].as_array().unwrap() {
        let params = &schema.value["parameters"];
        for name in names(&call["pathParams"])
            .into_iter()
            .chain(names(&call["query"]))
        {
            let shown = params
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["name"] == name.as_str()));
            assert!(
                shown,
                "task {id}: parameter {name} is not in api_schema's view"
            );
        }
        for field in names(&call["body"]) {
            assert!(
                has_key(&schema.value["requestBody"], &field),
                "task {id}: body field {field} is not in api_schema's view: {}",
                schema.value["requestBody"]
            );
        }
        if let Some(select) = call["select"].as_str() {
            let view = &schema.value["responses"];
            done.fields_shown &= select_roots(select).iter().all(|f| has_key(view, f));
        }
        let mut args = call.clone();
        for _ in 0..=call["followNext"].as_u64().unwrap_or(0) {
            let result = read(client, "api_execute", &args).await;
            assert!(!result.error, "task {id}: {args}: {}", result.value);
            assert_eq!(result.value["ok"], true, "task {id}: {}", result.value);
            done.calls += 1;
            done.execute += result.text;
            done.structured += result.structured;
            match search(answer_of, &result.value["body"]) {
                Value::Array(items) => done.answer.extend(items),
                Value::Null => {}
                other => done.answer.push(other),
            }
            match result.value.get("next") {
                Some(next) => args = next.clone(),
                None => break,
            }
        }
    }
    done
}

#[tokio::test]
async fn twelve_tasks_over_five_apis() {
    let tasks: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/data/agent-tasks.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("tests/data/agent-tasks.json"),
    )
    .expect("JSON");
    let data = FiveApis::data();
    let api = FiveApis::start().await;
    let five = FiveServer::start(&api.url()).await;
    let client = five.server.client().await;

    let mut table = String::from(
        "| # | API | task | calls | discover | schema | execute | total | answer | hits (rank) | select's fields in schema |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let (mut discover, mut schema, mut execute, mut structured) = (0, 0, 0, 0);
    for task in tasks["tasks"].as_array().unwrap() {
        let id = task["id"].as_u64().unwrap();
        let expected = match search(task["expected"].as_str().unwrap(), &data) {
            Value::Array(items) => items,
            other => panic!("task {id}: expected is not a list: {other}"),
        };
        assert!(!expected.is_empty(), "task {id}: nothing expected");
        let before = api.requests().len();
        let done = run(&client, task).await;
        assert_eq!(
            done.answer, expected,
            "task {id} ({}): the answer is wrong",
            task["task"]
        );
        if let Some(sent) = task["sent"].as_array() {
            let (line, piece) = (sent[0].as_str().unwrap(), sent[1].as_str().unwrap());
            let seen = &api.requests()[before..];
            assert!(
                seen.iter()
                    .any(|r| format!("{} {}", r.method, r.uri) == line && r.body.contains(piece)),
                "task {id}: the API did not receive {line} with {piece}: {seen:?}"
            );
        }
        let total = done.discover + done.schema + done.execute;
        assert_eq!(
            done.structured, total,
            "task {id}: the text and the structured content differ in size"
        );
        discover += done.discover;
        schema += done.schema;
        execute += done.execute;
        structured += done.structured;
        table.push_str(&format!(
            "| {id} | {} | {} | {} | {} | {} | {} | {total} | {} | {} ({}) | {} |\n",
            task["api"].as_str().unwrap(),
            task["task"].as_str().unwrap(),
            done.calls,
            done.discover,
            done.schema,
            done.execute,
            if done.answer == expected {
                "correct"
            } else {
                "wrong"
            },
            done.hits,
            done.rank,
            if done.fields_shown { "yes" } else { "no" },
        ));
    }
    let total = discover + schema + execute;
    table.push_str(&format!(
        "| | | all twelve | | {discover} | {schema} | {execute} | {total} | | | |\n"
    ));
    println!("{table}");
    println!(
        "discover + schema: {:.1} % of {total} bytes; structuredContent (Claude Code): {structured} bytes",
        100.0 * (discover + schema) as f64 / total as f64
    );
}
