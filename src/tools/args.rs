//! The three tools' arguments as typed structs, parsed once at the `tools/` boundary. The
//! agent's JSON is first checked against the tool's published input schema (`defs`), so every
//! violation is reported at once with its JSON pointer, then deserialized. Nothing after this
//! module reads argument maps by hand.

use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ToolError;
use super::defs::{self, DEFAULT_LIMIT, MAX_LIMIT};
use super::select::MAX_SELECT_BYTES;
use crate::spec::{Detail, Method, OperationName, Violation};

/// `api_discover`'s arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscoverArgs {
    pub query: String,
    #[serde(default)]
    pub method: Option<Method>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl DiscoverArgs {
    /// The number of results asked for (default 10).
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
    }
}

/// `api_schema`'s arguments: which operation, and what to include beyond the default.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchemaArgs {
    #[serde(default)]
    pub operation_id: Option<String>,
    #[serde(default)]
    pub method: Option<Method>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub include: Vec<Include>,
}

/// What `api_schema` adds on request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Include {
    /// The full response schemas.
    Responses,
    /// Every description in full, at any depth.
    Descriptions,
}

impl SchemaArgs {
    /// How much of the responses to show.
    pub fn detail(&self) -> Detail {
        if !self.include.is_empty() {
            Detail::Full
        } else {
            Detail::Compact
        }
    }
}

/// `api_execute`'s arguments: which operation, and the request's parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecuteArgs {
    #[serde(default)]
    pub operation_id: Option<String>,
    #[serde(default)]
    pub method: Option<Method>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub path_params: Map<String, Value>,
    #[serde(default)]
    pub query: Map<String, Value>,
    #[serde(default)]
    pub headers: Map<String, Value>,
    #[serde(default)]
    pub body: Option<Value>,
    /// The request body's media type, among those the operation declares.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The response media type to ask for, among those the operation declares or documents.
    #[serde(default)]
    pub accept: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
    /// A JMESPath expression applied to the response body before the budget (`select.rs`).
    #[serde(default)]
    pub select: Option<String>,
    /// How many pages to follow (GET only; default 1, at most `--max-pages`).
    #[serde(default)]
    pub pages: Option<usize>,
}

/// Size caps on the arguments that drive matching, ranking and embedding, checked right after
/// parsing and before any of them runs: a 4 MB `path` once took a minute of CPU to match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
pub struct InputLimits {
    /// Longest `path` argument, in bytes.
    #[arg(long, default_value_t = 8 * 1024)]
    pub max_path_bytes: usize,
    /// Longest `api_discover` query, in characters.
    #[arg(long, default_value_t = 1000)]
    pub max_query_chars: usize,
    /// Longest operationId, tag, media type, and path, query or header parameter value (as
    /// JSON text), in bytes.
    #[arg(long, default_value_t = 8 * 1024)]
    pub max_value_bytes: usize,
    /// Most pages one `api_execute` call may follow (`pages`); each is one upstream request.
    #[arg(long, default_value_t = DEFAULT_MAX_PAGES)]
    pub max_pages: usize,
    /// Most bytes one `api_execute` call may upload (a binary body or multipart files, counted
    /// decoded). Base64 in the JSON-RPC request is also bounded by --max-body-bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
}

/// Default `--max-pages`.
pub const DEFAULT_MAX_PAGES: usize = 10;

/// Default of `--max-request-bytes`: 10 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;

/// More segments than any API's path template has: a path beyond it cannot name an operation.
pub const MAX_PATH_SEGMENTS: usize = 64;

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_path_bytes: 8 * 1024,
            max_query_chars: 1000,
            max_value_bytes: 8 * 1024,
            max_pages: DEFAULT_MAX_PAGES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}

impl InputLimits {
    /// `INVALID_ARGUMENTS` naming every argument over its limit.
    pub fn check_discover(&self, a: &DiscoverArgs) -> Result<(), ToolError> {
        let mut over = Vec::new();
        let chars = a.query.chars().count();
        if chars > self.max_query_chars {
            over.push(at(
                "/query",
                &format!(
                    "{chars} characters, over the limit of {} (--max-query-chars): say it in \
                     fewer words",
                    self.max_query_chars
                ),
            ));
        }
        self.text(&mut over, "/tag", a.tag.as_deref());
        refuse(over)
    }

    pub fn check_schema(&self, a: &SchemaArgs) -> Result<(), ToolError> {
        let mut over = Vec::new();
        self.name(&mut over, a);
        refuse(over)
    }

    pub fn check_execute(&self, a: &ExecuteArgs) -> Result<(), ToolError> {
        let mut over = Vec::new();
        self.name(&mut over, a);
        self.text(&mut over, "/contentType", a.content_type.as_deref());
        self.text(&mut over, "/accept", a.accept.as_deref());
        if let Some(s) = &a.select
            && s.len() > MAX_SELECT_BYTES
        {
            over.push(at(
                "/select",
                &format!(
                    "{} bytes, over the limit of {MAX_SELECT_BYTES}: select fewer fields",
                    s.len()
                ),
            ));
        }
        if let Some(n) = a.pages
            && n > self.max_pages
        {
            over.push(at(
                "/pages",
                &format!(
                    "{n} pages, over the limit of {} (--max-pages): follow `next` from the \
                     last page instead",
                    self.max_pages
                ),
            ));
        }
        for (part, map) in [
            ("pathParams", &a.path_params),
            ("query", &a.query),
            ("headers", &a.headers),
        ] {
            for (name, value) in map {
                let pointer = format!("/{part}/{}", pointer_escape(name));
                self.text(&mut over, &pointer, Some(name));
                let len = match value {
                    Value::String(s) => s.len(),
                    other => other.to_string().len(),
                };
                if len > self.max_value_bytes {
                    over.push(self.too_long(&pointer, len));
                }
            }
        }
        refuse(over)
    }

    fn name(&self, over: &mut Vec<Violation>, a: &dyn NamesOperation) {
        let (id, _, path) = a.parts();
        self.text(over, "/operationId", id);
        let Some(path) = path else { return };
        if path.len() > self.max_path_bytes {
            over.push(at(
                "/path",
                &format!(
                    "{} bytes, over the limit of {} (--max-path-bytes)",
                    path.len(),
                    self.max_path_bytes
                ),
            ));
        } else if path.split('/').count() > MAX_PATH_SEGMENTS + 1 {
            over.push(at(
                "/path",
                &format!(
                    "more than {MAX_PATH_SEGMENTS} segments: no operation's path is that deep"
                ),
            ));
        }
    }

    fn text(&self, over: &mut Vec<Violation>, pointer: &str, text: Option<&str>) {
        if let Some(t) = text
            && t.len() > self.max_value_bytes
        {
            over.push(self.too_long(pointer, t.len()));
        }
    }

    fn too_long(&self, pointer: &str, len: usize) -> Violation {
        at(
            pointer,
            &format!(
                "{len} bytes, over the limit of {} (--max-value-bytes)",
                self.max_value_bytes
            ),
        )
    }
}

fn refuse(over: Vec<Violation>) -> Result<(), ToolError> {
    if over.is_empty() {
        return Ok(());
    }
    Err(ToolError::invalid(
        "an argument is over its size limit (see `violations`)",
        over,
    ))
}

/// `name` as one JSON pointer token (RFC 6901).
fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Arguments that name an operation.
pub trait NamesOperation {
    fn parts(&self) -> (Option<&str>, Option<Method>, Option<&str>);

    /// The operation the arguments name: `operationId`, else `method` + `path`.
    fn operation_name(&self) -> Result<OperationName<'_>, ToolError> {
        let (id, method, path) = self.parts();
        if let Some(id) = id.map(str::trim).filter(|s| !s.is_empty()) {
            return Ok(OperationName::Id(id));
        }
        let path = path.map(str::trim).filter(|s| !s.is_empty());
        let (Some(method), Some(path)) = (method, path) else {
            return Err(ToolError::invalid(
                "name the operation: give `operationId` (from api_discover), or `method` and `path`",
                vec![Violation {
                    pointer: String::new(),
                    message: "operationId, or method and path, is required".into(),
                }],
            ));
        };
        if !path.starts_with('/') {
            return Err(ToolError::invalid(
                format!("`path` must start with '/', got {path:?}"),
                vec![at("/path", "must start with '/'")],
            ));
        }
        if path.contains('?') || path.contains('#') {
            return Err(ToolError::invalid(
                "`path` must not contain '?' or '#': put query parameters in `query`",
                vec![at("/path", "must not contain '?' or '#'")],
            ));
        }
        Ok(OperationName::Route { method, path })
    }
}

impl NamesOperation for SchemaArgs {
    fn parts(&self) -> (Option<&str>, Option<Method>, Option<&str>) {
        (
            self.operation_id.as_deref(),
            self.method,
            self.path.as_deref(),
        )
    }
}

impl NamesOperation for ExecuteArgs {
    fn parts(&self) -> (Option<&str>, Option<Method>, Option<&str>) {
        (
            self.operation_id.as_deref(),
            self.method,
            self.path.as_deref(),
        )
    }
}

/// Parses `api_discover`'s arguments.
pub fn discover(args: Map<String, Value>) -> Result<DiscoverArgs, ToolError> {
    let parsed: DiscoverArgs = parse(defs::DISCOVER, args)?;
    if parsed.query.trim().is_empty() {
        return Err(ToolError::invalid(
            "`query` is required: say in plain words what you want to do, e.g. \"list open pull requests\"",
            vec![at("/query", "required, non-empty string")],
        ));
    }
    Ok(parsed)
}

/// Parses `api_schema`'s arguments.
pub fn schema(args: Map<String, Value>) -> Result<SchemaArgs, ToolError> {
    parse(defs::SCHEMA, args)
}

/// Parses `api_execute`'s arguments.
pub fn execute(args: Map<String, Value>) -> Result<ExecuteArgs, ToolError> {
    parse(defs::EXECUTE, args)
}

/// Validates `args` against `tool`'s input schema, then deserializes them. A `null` argument
/// counts as absent; `method` is read in any case.
fn parse<T: DeserializeOwned>(tool: &str, mut args: Map<String, Value>) -> Result<T, ToolError> {
    args.retain(|_, v| !v.is_null());
    if let Some(Value::String(m)) = args.get_mut("method")
        && let Some(method) = Method::parse(m)
    {
        *m = method.as_str().to_string();
    }
    let value = Value::Object(args);
    let violations = crate::spec::violations(validator(tool), &value);
    if !violations.is_empty() {
        let n = violations.len();
        let takes = defs::argument_names(tool).join(", ");
        return Err(ToolError::invalid(
            format!(
                "{n} problem{} with the arguments of {tool} (see `violations`); it takes {takes}",
                if n == 1 { "" } else { "s" }
            ),
            violations,
        ));
    }
    serde_json::from_value(value).map_err(|e| {
        ToolError::invalid(
            format!("the arguments of {tool} do not fit: {e}"),
            vec![at("", &e.to_string())],
        )
    })
}

/// The compiled input schemas, one per tool.
fn validator(tool: &str) -> &'static jsonschema::Validator {
    static VALIDATORS: OnceLock<Vec<(&'static str, jsonschema::Validator)>> = OnceLock::new();
    let all = VALIDATORS.get_or_init(|| {
        defs::NAMES
            .iter()
            .map(|name| {
                let schema = defs::input_schema(name);
                let v = jsonschema::validator_for(&schema)
                    .unwrap_or_else(|e| panic!("the input schema of {name} compiles: {e}"));
                (*name, v)
            })
            .collect()
    });
    all.iter()
        .find(|(name, _)| *name == tool)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{tool} is one of defs::NAMES"))
}

fn at(pointer: &str, message: &str) -> Violation {
    Violation {
        pointer: pointer.to_string(),
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("an object"),
        }
    }

    fn pointers(e: &ToolError) -> Vec<String> {
        e.details["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["pointer"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn every_violation_is_reported_at_once() {
        let e = execute(map(json!({
            "operationId": 7, "pathParams": [], "dryRun": "yes", "extra": 1, "more": 2
        })))
        .unwrap_err();
        let mut p = pointers(&e);
        p.sort();
        assert_eq!(
            p,
            ["/dryRun", "/extra", "/more", "/operationId", "/pathParams"]
        );
        let e = schema(map(json!({"operationId": "x", "verbose": true}))).unwrap_err();
        assert_eq!(pointers(&e), ["/verbose"]);
        assert!(e.message.contains("operationId"), "{}", e.message);
    }

    #[test]
    fn nulls_are_absent_and_methods_any_case() {
        let a = execute(map(
            json!({"method": "get", "path": "/pets", "query": null}),
        ))
        .unwrap();
        assert_eq!(a.method, Some(Method::Get));
        assert!(a.query.is_empty());
        let e = discover(map(json!({"query": "x", "method": "FETCH"}))).unwrap_err();
        assert_eq!(pointers(&e), ["/method"]);
        let msg = e.details["violations"][0]["message"].as_str().unwrap();
        assert!(
            msg.contains("\"TRACE\""),
            "every allowed method is listed: {msg}"
        );
    }

    #[test]
    fn an_operation_is_named_by_id_or_route() {
        let a = schema(map(json!({"operationId": " getPet "}))).unwrap();
        assert_eq!(a.operation_name().unwrap(), OperationName::Id("getPet"));
        let a = schema(map(json!({"method": "DELETE", "path": "/pets/1"}))).unwrap();
        assert_eq!(
            a.operation_name().unwrap(),
            OperationName::Route {
                method: Method::Delete,
                path: "/pets/1"
            }
        );
        for bad in [
            json!({}),
            json!({"path": "/pets"}),
            json!({"method": "GET", "path": "pets"}),
        ] {
            let a = schema(map(bad)).unwrap();
            let e = a.operation_name().unwrap_err();
            assert!(e.details["violations"].is_array(), "{e}");
        }
    }

    #[test]
    fn discover_needs_words() {
        let e = discover(map(json!({"query": "   "}))).unwrap_err();
        assert_eq!(pointers(&e), ["/query"]);
        let e = discover(map(json!({"limit": 0}))).unwrap_err();
        let mut p = pointers(&e);
        p.sort();
        assert_eq!(p, ["", "/limit"]);
        assert_eq!(
            discover(map(json!({"query": "pets"}))).unwrap().limit(),
            DEFAULT_LIMIT
        );
    }
}
