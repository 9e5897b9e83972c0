//! What each tool does once the pipeline lets it run: argument parsing and operation
//! resolution (shared by `api_schema` and `api_execute`), and the three tool bodies.

use serde_json::{Map, Value, json};

use super::defs::{DEFAULT_LIMIT, MAX_LIMIT};
use super::{Code, Engine, ToolError, ToolResult};
use crate::auth::Principal;
use crate::index::Query;
use crate::spec::{Operation, Spec};
use crate::upstream::CallArgs;

/// Headers an agent may never set, whatever the operation declares.
const FORBIDDEN_HEADERS: [&str; 13] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "content-length",
    "expect",
];

/// A validated call, ready to run.
pub enum Prepared {
    Discover(Discover),
    Schema(usize),
    Execute {
        op: usize,
        args: Box<CallArgs>,
        dry_run: bool,
    },
}

impl Prepared {
    /// The operation the call is about, if any.
    pub fn operation<'a>(&self, spec: &'a Spec) -> Option<&'a Operation> {
        match self {
            Prepared::Discover(_) => None,
            Prepared::Schema(op) | Prepared::Execute { op, .. } => spec.operations.get(*op),
        }
    }
}

pub struct Discover {
    query: String,
    method: Option<String>,
    tag: Option<String>,
    limit: usize,
}

fn opt_str<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(ToolError::invalid(format!(
            "`{key}` must be a string, not {}",
            type_name(other)
        ))
        .with(
            "violations",
            json!([{"pointer": format!("/{key}"), "message": "expected a string"}]),
        )),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_keys(args: &Map<String, Value>, allowed: &[&str], tool: &str) -> Result<(), ToolError> {
    let unknown: Vec<&String> = args
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let violations: Vec<Value> = unknown
        .iter()
        .map(|k| json!({"pointer": format!("/{k}"), "message": format!("unknown argument {k:?}")}))
        .collect();
    Err(ToolError::invalid(format!(
        "{tool} does not take {}; its arguments are {}",
        unknown
            .iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        allowed.join(", ")
    ))
    .with("violations", Value::Array(violations)))
}

fn parse_method(args: &Map<String, Value>) -> Result<Option<String>, ToolError> {
    let Some(m) = opt_str(args, "method")? else {
        return Ok(None);
    };
    let upper = m.trim().to_ascii_uppercase();
    if crate::spec::METHODS_UPPER.contains(&upper.as_str()) {
        Ok(Some(upper))
    } else {
        Err(ToolError::invalid(format!(
            "`method` {m:?} is not an HTTP method (GET, POST, PUT, PATCH, DELETE, …)"
        )))
    }
}

pub fn parse_discover(args: &Map<String, Value>) -> Result<Discover, ToolError> {
    check_keys(args, &["query", "method", "tag", "limit"], "api_discover")?;
    let query = opt_str(args, "query")?.map(str::trim).unwrap_or_default();
    if query.is_empty() {
        return Err(ToolError::invalid("`query` is required: say in plain words what you want to do, e.g. \"list open pull requests\"")
            .with("violations", json!([{"pointer": "/query", "message": "required, non-empty string"}])));
    }
    let limit = match args.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) if n >= 1 => (n as usize).min(MAX_LIMIT),
            _ => {
                return Err(ToolError::invalid(
                    "`limit` must be a whole number from 1 to 50",
                ));
            }
        },
        Some(other) => {
            return Err(ToolError::invalid(format!(
                "`limit` must be a number, not {}",
                type_name(other)
            )));
        }
    };
    Ok(Discover {
        query: query.to_string(),
        method: parse_method(args)?,
        tag: opt_str(args, "tag")?.map(str::to_string),
        limit,
    })
}

/// The operation the arguments name, if they name one of this spec's (no errors, no permission
/// check): what the audit row records when the call fails before it is fully prepared.
pub fn named_operation(engine: &Engine, args: &Map<String, Value>) -> Option<usize> {
    let spec = &engine.spec;
    if let Some(Value::String(id)) = args.get("operationId") {
        return spec.index_of(id.trim());
    }
    let (Some(Value::String(method)), Some(Value::String(path))) =
        (args.get("method"), args.get("path"))
    else {
        return None;
    };
    let (op, _) = spec.find(method.trim(), path.trim())?;
    spec.index_of(&op.id)
}

/// Finds the operation named by `operationId`, or by `method` + `path` (template or concrete);
/// returns its index and the path values a concrete path carried.
pub fn resolve(
    engine: &Engine,
    principal: &Principal,
    args: &Map<String, Value>,
) -> Result<(usize, Vec<(String, String)>), ToolError> {
    let (index, values) = find(engine, principal, args)?;
    let op = &engine.spec.operations[index];
    principal
        .may_execute(&op.method, &op.path, &op.required_features, &engine.rules)
        .map_err(super::auth_error)?;
    Ok((index, values))
}

fn find(
    engine: &Engine,
    principal: &Principal,
    args: &Map<String, Value>,
) -> Result<(usize, Vec<(String, String)>), ToolError> {
    let spec = &engine.spec;
    if let Some(id) = opt_str(args, "operationId")?
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        return match spec.index_of(id) {
            Some(i) => Ok((i, Vec::new())),
            None => Err(unknown_operation(
                engine,
                principal,
                &format!("operationId {id:?}"),
                id,
            )),
        };
    }
    let method = parse_method(args)?;
    let path = opt_str(args, "path")?
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let (Some(method), Some(path)) = (method, path) else {
        return Err(ToolError::invalid(
            "name the operation: give `operationId` (from api_discover), or `method` and `path`",
        ));
    };
    if !path.starts_with('/') {
        return Err(ToolError::invalid(format!(
            "`path` must start with '/', got {path:?}"
        )));
    }
    if path.contains('?') || path.contains('#') {
        return Err(ToolError::invalid(
            "`path` must not contain '?' or '#': put query parameters in `query`",
        ));
    }
    match spec.find(&method, path) {
        Some((op, values)) => Ok((spec.index_of(&op.id).unwrap_or_default(), values)),
        None => Err(unknown_operation(
            engine,
            principal,
            &format!("{method} {path}"),
            path,
        )),
    }
}

fn unknown_operation(engine: &Engine, principal: &Principal, what: &str, hint: &str) -> ToolError {
    let words: String = hint
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let allowed = visible(engine, principal);
    let hits = engine.index.search(&Query {
        text: &words,
        method: None,
        tag: None,
        limit: 5,
        allowed: Some(&allowed),
        vector: None,
    });
    let closest: Vec<Value> = hits
        .iter()
        .filter_map(|h| engine.spec.operations.get(h.op))
        .map(|o| json!({"operationId": o.id, "method": o.method, "path": o.path}))
        .collect();
    ToolError::new(
        Code::UnknownOperation,
        format!("{what} is not an operation of this API; use api_discover to find one (closest matches are listed)"),
    )
    .with("closest", Value::Array(closest))
}

fn object_arg(args: &Map<String, Value>, key: &str) -> Result<Map<String, Value>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(other) => Err(ToolError::invalid(format!(
            "`{key}` must be an object, not {}",
            type_name(other)
        ))
        .with(
            "violations",
            json!([{"pointer": format!("/{key}"), "message": "expected an object"}]),
        )),
    }
}

/// Which operations the principal may see (discovery shows only what it may execute).
fn visible<'a>(
    engine: &'a Engine,
    principal: &'a Principal,
) -> impl Fn(usize, usize) -> bool + Sync + 'a {
    move |_, i| {
        engine.spec.operations.get(i).is_some_and(|op| {
            principal.may_see(&op.method, &op.path, &op.required_features, &engine.rules)
        })
    }
}

pub fn prepare_execute(
    engine: &Engine,
    principal: &Principal,
    args: &Map<String, Value>,
) -> Result<Prepared, ToolError> {
    check_keys(
        args,
        &[
            "operationId",
            "method",
            "path",
            "pathParams",
            "query",
            "headers",
            "body",
            "dryRun",
        ],
        "api_execute",
    )?;
    let (index, values) = resolve(engine, principal, args)?;
    let op = &engine.spec.operations[index];
    let mut path_params = object_arg(args, "pathParams")?;
    for (name, value) in values {
        path_params.entry(name).or_insert(Value::String(value));
    }
    let query = object_arg(args, "query")?;
    let given_headers = object_arg(args, "headers")?;
    let forbidden: Vec<&String> = given_headers
        .keys()
        .filter(|h| FORBIDDEN_HEADERS.contains(&h.to_ascii_lowercase().as_str()))
        .collect();
    if !forbidden.is_empty() {
        return Err(ToolError::invalid(format!(
            "header {} cannot be set by the agent: credentials and connection headers are added by the server",
            forbidden.iter().map(|h| format!("{h:?}")).collect::<Vec<_>>().join(", ")
        ))
        .with("violations", Value::Array(forbidden.iter().map(|h| json!({"pointer": format!("/headers/{h}"), "message": "not allowed"})).collect())));
    }
    // Header names are case-insensitive: use the declared spelling.
    let mut headers = Map::new();
    for (k, v) in given_headers {
        let declared = op
            .parameters
            .iter()
            .find(|p| p.location == crate::spec::ParamIn::Header && p.name.eq_ignore_ascii_case(&k))
            .map(|p| p.name.clone());
        headers.insert(declared.unwrap_or(k), v);
    }
    let body = args.get("body").cloned();
    let dry_run = match args.get("dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ToolError::invalid(format!(
                "`dryRun` must be true or false, not {}",
                type_name(other)
            )));
        }
    };
    let mut to_check = Map::new();
    for (k, v) in [
        ("pathParams", &path_params),
        ("query", &query),
        ("headers", &headers),
    ] {
        if !v.is_empty() {
            to_check.insert(k.into(), Value::Object(v.clone()));
        }
    }
    if let Some(b) = &body {
        to_check.insert("body".into(), b.clone());
    }
    let mut to_check = Value::Object(to_check);
    let violations = engine.spec.validate(op, &mut to_check);
    if !violations.is_empty() {
        let n = violations.len();
        return Err(ToolError::invalid(format!(
            "{n} argument problem{} for {} ({} {}); fix them all (see `violations`) and call again — api_schema shows the expected shapes",
            if n == 1 { "" } else { "s" }, op.id, op.method, op.path
        ))
        .with("operationId", Value::String(op.id.clone()))
        .with("violations", serde_json::to_value(&violations).unwrap_or_default()));
    }
    let take = |k: &str| match to_check.get(k) {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    Ok(Prepared::Execute {
        op: index,
        args: Box::new(CallArgs {
            path_params: take("pathParams"),
            query: take("query"),
            headers: take("headers"),
            body: to_check.get("body").cloned(),
        }),
        dry_run,
    })
}

/// The query's embedding when the index is hybrid: from the cache of recent queries, else
/// computed on a blocking thread (a forward pass of the model takes milliseconds of CPU).
async fn query_vector(engine: &Engine, text: &str) -> Option<std::sync::Arc<[f32]>> {
    if engine.index.ranker() != crate::index::Ranker::Hybrid {
        return None;
    }
    if let Some(v) = engine.index.cached_query_vector(text) {
        return Some(v);
    }
    let index = engine.index.clone();
    let text = text.to_string();
    tokio::task::spawn_blocking(move || index.query_vector(&text))
        .await
        .ok()
        .flatten()
}

/// A short one-line summary for discovery results.
fn short_summary(op: &Operation) -> String {
    let text = op
        .summary
        .as_deref()
        .or(op.description.as_deref())
        .unwrap_or_default();
    let first = text.split_inclusive(". ").next().unwrap_or(text).trim();
    if first.chars().count() > 160 {
        let mut s: String = first.chars().take(160).collect();
        s.push('…');
        s
    } else {
        first.to_string()
    }
}

pub async fn run(
    engine: &Engine,
    principal: &Principal,
    prepared: Prepared,
    upstream_status: &mut Option<u16>,
) -> ToolResult {
    match prepared {
        Prepared::Discover(d) => {
            let allowed = visible(engine, principal);
            let vector = query_vector(engine, &d.query).await;
            let (hits, total) = engine.index.search_total(&Query {
                text: &d.query,
                method: d.method.as_deref(),
                tag: d.tag.as_deref(),
                limit: d.limit,
                allowed: Some(&allowed),
                vector: vector.as_deref(),
            });
            let results: Vec<Value> = hits
                .iter()
                .filter_map(|h| engine.spec.operations.get(h.op).map(|op| (op, h.score)))
                .map(|(op, score)| {
                    json!({
                        "operationId": op.id,
                        "method": op.method,
                        "path": op.path,
                        "summary": short_summary(op),
                        "tags": op.tags,
                        "mutating": op.mutating(),
                        "score": (score * 1000.0).round() / 1000.0,
                    })
                })
                .collect();
            Ok(json!({"results": results, "total": total}))
        }
        Prepared::Schema(i) => Ok(engine.spec.describe(&engine.spec.operations[i])),
        Prepared::Execute { op, args, dry_run } => {
            let op = &engine.spec.operations[op];
            let request = engine
                .upstream
                .prepare(&engine.spec, op, &args)
                .map_err(upstream_error)?;
            if dry_run {
                return Ok(
                    json!({"dryRun": true, "operationId": op.id, "request": request.view()}),
                );
            }
            let response = engine
                .upstream
                .send(&request)
                .await
                .map_err(upstream_error)?;
            *upstream_status = Some(response.status);
            metrics::counter!("apigate_upstream_responses_total", "status" => response.status.to_string()).increment(1);
            let value = serde_json::to_value(&response).unwrap_or_default();
            if response.status >= 500 {
                let mut e = ToolError::new(
                    Code::UpstreamError,
                    format!(
                        "the API answered HTTP {} for {} {}",
                        response.status, op.method, op.path
                    ),
                );
                if let Value::Object(m) = value {
                    e.details.extend(m);
                }
                return Err(e);
            }
            Ok(value)
        }
    }
}

fn upstream_error(e: crate::upstream::UpstreamError) -> ToolError {
    let code = match e.code() {
        "INVALID_ARGUMENTS" => Code::InvalidArguments,
        "UPSTREAM_TIMEOUT" => Code::UpstreamTimeout,
        _ => Code::UpstreamError,
    };
    ToolError::new(code, e.to_string())
}
