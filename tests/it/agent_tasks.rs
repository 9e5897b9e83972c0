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
//! docs/responses.md), which must be the same bytes; every result must also be what its tool's
//! `outputSchema` says. Beside the table, what the shorter defaults must not lose: `detail`
//! reaches every description and field the compact view shortens, a hit left out by default
//! is one `limit` away, and a selected answer keeps the headers an agent acts on.
//!
//! `scripts/agent-tasks.sh` prints the table (`cargo test --test it agent_tasks:: --
//! --nocapture`).

use std::os::unix::fs::PermissionsExt;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::five_apis::FiveApis;
use crate::support::{Server, engine_args, search, spec_path};

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
    /// Every result read: (tool, structured content).
    read: Vec<(&'static str, Value)>,
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
        read: Vec::new(),
    };
    // 1. Discover, and pick the operation among the hits shown.
    let found = read(client, "api_discover", &task["discover"]).await;
    assert!(!found.error, "task {id}: {}", found.value);
    done.calls += 1;
    done.discover += found.text;
    done.structured += found.structured;
    done.read.push(("api_discover", found.value.clone()));
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
    done.read.push(("api_schema", schema.value.clone()));
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
            done.read.push(("api_execute", result.value.clone()));
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
    // What each tool publishes its results to be.
    let tools = client.list_all_tools().await.unwrap();
    let validator = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let schema = Value::Object((*tool.output_schema.clone().expect("an outputSchema")).clone());
        jsonschema::validator_for(&schema).unwrap()
    };
    let validators: std::collections::HashMap<&str, jsonschema::Validator> =
        ["api_discover", "api_schema", "api_execute"]
            .into_iter()
            .map(|t| (t, validator(t)))
            .collect();

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
        for (tool, result) in &done.read {
            let errors: Vec<String> = validators[tool]
                .iter_errors(result)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "task {id}: {tool}'s result is not what its outputSchema says: {errors:?}"
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

/// Follows `$ref`s (`#/…`) from `v` in the document `doc`.
fn follow<'a>(doc: &'a Value, mut v: &'a Value) -> &'a Value {
    for _ in 0..32 {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let pointer = r.strip_prefix('#').expect("a local $ref");
                v = doc
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("{r} resolves"));
            }
            None => break,
        }
    }
    v
}

/// The property names of a schema of `doc` (its `allOf` branches' too; a list's items'), read
/// from the document itself, not through apigate.
fn field_names(doc: &Value, schema: &Value) -> Vec<String> {
    let mut s = follow(doc, schema);
    while let Some(items) = s.get("items").filter(|i| i.is_object()) {
        s = follow(doc, items);
    }
    let mut names: Vec<String> = s["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for branch in s["allOf"].as_array().into_iter().flatten() {
        names.extend(field_names(doc, branch));
    }
    names
}

/// The success body schema of the operation `id` in `doc` (OpenAPI 3 or Swagger 2.0), and its
/// status, read from the document.
fn success_body<'a>(doc: &'a Value, id: &str) -> (String, &'a Value) {
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            if op["operationId"] != id {
                continue;
            }
            for (status, r) in op["responses"].as_object().unwrap() {
                if !status.starts_with('2') {
                    continue;
                }
                let r = follow(doc, r);
                let schema = r
                    .get("schema")
                    .or_else(|| r.pointer("/content/application~1json/schema"));
                if let Some(schema) = schema {
                    return (status.clone(), schema);
                }
            }
        }
    }
    panic!("{id} has no success body")
}

/// Nothing the compact default leaves out is out of reach: for the operation of every task,
/// `detail: "full"` shows every parameter's and the operation's description whole (as the
/// spec has them, up to apigate's 2,000-character cut) and every field of the request body;
/// each field of the success body (read from the spec document itself) is in the full view's
/// response schema, and `detail: "responses.STATUS.FIELD"` and `detail: PARAMETER` show each
/// one. A field the compact outline leaves out (a Stripe charge's `refunded`, the 41st of
/// its fields) is one `detail` away.
#[tokio::test]
async fn detail_reaches_every_description_and_field() {
    let tasks: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/data/agent-tasks.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let api = FiveApis::start().await;
    let five = FiveServer::start(&api.url()).await;
    let client = five.server.client().await;
    let whole = |s: &str| -> String {
        if s.chars().count() > 2000 {
            s.chars().take(2000).chain(['…']).collect()
        } else {
            s.to_string()
        }
    };
    for (name, file, _) in APIS {
        let spec = apigate::spec::Spec::load(&spec_path(file)).await.unwrap();
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(spec_path(file)).unwrap()).unwrap();
        for task in tasks["tasks"].as_array().unwrap() {
            if task["api"] != name {
                continue;
            }
            let shown_id = task["pick"].as_str().unwrap();
            let id = shown_id.split_once(':').unwrap().1;
            let op = spec.get(id).unwrap();
            let full = read(
                &client,
                "api_schema",
                &json!({"operationId": shown_id, "detail": "full"}),
            )
            .await;
            assert!(!full.error, "{}", full.value);
            let full = full.value;
            if let Some(d) = &op.description {
                assert_eq!(full["description"], whole(d).as_str(), "{id}");
            }
            let listed = full["parameters"].as_array().unwrap();
            for p in &op.parameters {
                // A credential parameter the server supplies is listed under `security`.
                let Some(shown) = listed.iter().find(|s| s["name"] == p.name.as_str()) else {
                    let supplied = &full["security"]["suppliedParameters"];
                    assert!(supplied.to_string().contains(&p.name), "{id}: {}", p.name);
                    continue;
                };
                let in_schema = follow(&doc, &p.schema)["description"].as_str();
                match (&p.description, in_schema) {
                    (Some(d), _) => assert_eq!(shown["description"], whole(d).as_str(), "{id}"),
                    (None, Some(d)) => assert_eq!(shown["schema"]["description"], d, "{id}"),
                    (None, None) => {}
                }
                // And the parameter alone.
                let part = read(
                    &client,
                    "api_schema",
                    &json!({"operationId": shown_id, "detail": p.name}),
                )
                .await;
                assert!(!part.error, "{}", part.value);
                assert_eq!(part.value["part"], *shown, "{id} {}", p.name);
            }
            if let Some(body) = op.request_body.as_ref().and_then(|b| b.preferred()) {
                for field in field_names(&doc, &body.schema) {
                    assert!(
                        full["requestBody"]["schema"]["properties"]
                            .get(&field)
                            .is_some(),
                        "{id}: body field {field}"
                    );
                }
            }
            let (status, schema) = success_body(&doc, id);
            let response = &full["responses"][&status]["schema"];
            let fields = field_names(&doc, schema);
            assert!(!fields.is_empty(), "{id}");
            for field in &fields {
                assert!(
                    has_key(response, field),
                    "{id}: field {field} of {status} is not in the full view"
                );
                let part = read(
                    &client,
                    "api_schema",
                    &json!({"operationId": shown_id, "detail": format!("responses.{status}.{field}")}),
                )
                .await;
                assert!(!part.error, "{id} {field}: {}", part.value);
                assert!(part.value["part"].is_object(), "{}", part.value);
            }
        }
    }
    // The refund answers a charge: its 45 fields are outlined 20 at a time, and the rest
    // says how to see them.
    let id = "stripe:PostChargesChargeRefund";
    let compact = read(&client, "api_schema", &json!({"operationId": id})).await;
    let fields = compact.value["responses"]["200"]["fields"]
        .as_str()
        .unwrap();
    assert!(
        !fields.split(", ").any(|f| f == "refunded") && fields.ends_with(" more}"),
        "{fields}"
    );
    assert!(
        compact.value["more"]
            .as_str()
            .unwrap()
            .contains("\"responses.200\""),
        "{}",
        compact.value
    );
    let part = read(
        &client,
        "api_schema",
        &json!({"operationId": id, "detail": "responses.200.refunded"}),
    )
    .await;
    assert_eq!(part.value["part"]["type"], "boolean", "{}", part.value);
    assert_eq!(part.value["detail"], "responses.200.refunded");
    // A path that names nothing says what there is, and sends nothing.
    let (error, refused) = crate::support::call(
        &client,
        "api_schema",
        json!({"operationId": id, "detail": "responses.200.refundedd"}),
    )
    .await;
    assert!(error);
    assert_eq!(refused["code"], "INVALID_ARGUMENTS");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("no field \"refundedd\"") && message.contains("refunded"),
        "{message}"
    );
    assert_eq!(refused["violations"][0]["pointer"], "/detail");
    let (error, refused) = crate::support::call(
        &client,
        "api_schema",
        json!({"operationId": id, "detail": "x".repeat(300)}),
    )
    .await;
    assert!(error, "a detail over 256 bytes is refused: {refused}");
}

/// A hit the smaller default leaves out is still there with `limit`: the default hits are the
/// first of the `limit: 10` ones, in the same order.
#[tokio::test]
async fn a_hit_left_out_by_default_is_reachable_with_limit() {
    let api = FiveApis::start().await;
    let five = FiveServer::start(&api.url()).await;
    let client = five.server.client().await;
    let ids = |v: &Value| -> Vec<String> {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["operationId"].as_str().unwrap().to_string())
            .collect()
    };
    let query = "message history of a slack channel";
    let default = read(&client, "api_discover", &json!({"query": query})).await;
    let ten = read(
        &client,
        "api_discover",
        &json!({"query": query, "limit": 10}),
    )
    .await;
    let (default, ten) = (ids(&default.value), ids(&ten.value));
    assert_eq!(default.len(), 3, "{default:?}");
    assert_eq!(ten.len(), 10, "{ten:?}");
    assert_eq!(ten[..3], default[..]);
    // `conversations.replies`, left out by default, is one `limit` away.
    assert!(!default.iter().any(|id| id == "slack:conversations_replies"));
    assert!(ten.iter().any(|id| id == "slack:conversations_replies"));
    // `limit` is honoured as given, even when the best hit is clear.
    let two = read(
        &client,
        "api_discover",
        &json!({"query": query, "limit": 2}),
    )
    .await;
    assert_eq!(ids(&two.value), default[..2]);
}

/// With `select`, `api_execute` returns only the headers an agent acts on (`link`,
/// `location`, the rate limit's remaining and reset, `content-type`) and no `durationMs`;
/// without it, every allow-listed header and the timing, as before.
#[tokio::test]
async fn a_selected_answer_keeps_only_the_headers_an_agent_acts_on() {
    let api = FiveApis::start().await;
    let five = FiveServer::start(&api.url()).await;
    let client = five.server.client().await;
    let get = json!({"operationId": "github:issues/get", "pathParams": {"owner": "octo", "repo": "hello", "issue_number": 42}});
    let whole = read(&client, "api_execute", &get).await.value;
    let headers = whole["headers"].as_object().unwrap();
    for h in [
        "etag",
        "cache-control",
        "x-github-request-id",
        "x-ratelimit-limit",
        "x-ratelimit-used",
        "content-length",
    ] {
        assert!(headers.contains_key(h), "{h}: {headers:?}");
    }
    assert!(whole["durationMs"].is_u64(), "{whole}");
    let mut selected = get.clone();
    selected["select"] = json!("title");
    let selected = read(&client, "api_execute", &selected).await.value;
    let mut kept: Vec<&str> = selected["headers"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    kept.sort_unstable();
    assert_eq!(
        kept,
        ["content-type", "x-ratelimit-remaining", "x-ratelimit-reset"]
    );
    assert!(selected.get("durationMs").is_none(), "{selected}");
    assert_eq!(selected["body"], whole["body"]["title"]);
    // A created comment's `Location`, and a list's `Link`, stay.
    let created = read(
        &client,
        "api_execute",
        &json!({"operationId": "github:issues/create-comment", "pathParams": {"owner": "octo", "repo": "hello", "issue_number": 7}, "body": {"body": "seen"}, "select": "id"}),
    )
    .await
    .value;
    assert!(
        created["headers"]["location"]
            .as_str()
            .unwrap()
            .ends_with("/issues/comments/2047558007"),
        "{created}"
    );
    let listed = read(
        &client,
        "api_execute",
        &json!({"operationId": "github:issues/list-for-repo", "pathParams": {"owner": "octo", "repo": "hello"}, "query": {"per_page": 5}, "select": "[].number"}),
    )
    .await
    .value;
    assert!(
        listed["headers"]["link"]
            .as_str()
            .unwrap()
            .contains("rel=\"next\""),
        "{listed}"
    );
    // A 4xx is not selected: its headers stay whole.
    let missing = read(
        &client,
        "api_execute",
        &json!({"operationId": "github:issues/get", "pathParams": {"owner": "octo", "repo": "hello", "issue_number": 999}, "select": "title"}),
    )
    .await
    .value;
    assert_eq!(missing["ok"], false);
    assert!(
        missing["headers"]["x-github-request-id"].is_string(),
        "{missing}"
    );
    assert!(missing["durationMs"].is_u64());
}
