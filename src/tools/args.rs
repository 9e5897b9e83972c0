//! The three tools' arguments as typed structs, parsed once at the `tools/` boundary. The
//! agent's JSON is first checked against the tool's published input schema (`defs`), so every
//! violation is reported at once with its JSON pointer, then deserialized (`select` compiled on
//! the way). Nothing after this module reads argument maps by hand; the pipeline's own calls
//! (a page after the first) are built as these structs and never pass through JSON.

use std::sync::OnceLock;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::defs::{self, DEFAULT_LIMIT, MAX_LIMIT, MAX_SKIP_ITEMS};
use super::error::ToolError;
use super::select::{MAX_SELECT_BYTES, Select};
use crate::spec::{Detail, Method, OperationName, Violation};
use crate::types::Tool;
use crate::upstream::CallArgs;

/// What one pass of the pipeline parses: the agent's arguments, or the typed arguments of the
/// page after the last one, which the pipeline built itself.
pub(crate) enum Input {
    Agent(Map<String, Value>),
    NextPage(Box<ExecuteArgs>),
}

/// `api_discover`'s arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscoverArgs {
    /// Empty: the overview (unless a filter is given).
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub method: Option<Method>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only this API's operations (several APIs).
    #[serde(default)]
    pub api: Option<String>,
}

impl DiscoverArgs {
    /// The number of results asked for (default 10).
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
    }
}

/// Which operation `api_schema` and `api_execute` name: `operationId`, else `method` + `path`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Target {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The API the operation belongs to (several APIs; an id may say it as `NAME:id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
}

// The structs below flatten their parts, which serde cannot combine with
// `deny_unknown_fields`: unknown arguments are refused by the input schema (`parse`) first.

/// `api_schema`'s arguments: which operation, and how much of it to show.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaArgs {
    #[serde(flatten)]
    pub target: Target,
    /// `"full"`, or the part to show whole (a parameter, `responses.200.items`, …).
    #[serde(default)]
    pub detail: Option<String>,
    /// The older form of `detail: "full"`.
    #[serde(default)]
    pub include: Vec<Include>,
}

/// What `api_schema` adds on request (the older form of `detail: "full"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Include {
    /// The full response schemas.
    Responses,
    /// Every description in full, at any depth.
    Descriptions,
}

/// How much of an operation `api_schema` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaDetail {
    /// The whole view, compact or full.
    View(Detail),
    /// One part, whole: `detail` names it (`spec::Spec::describe_part`).
    Part(String),
}

impl SchemaArgs {
    /// What to show: `detail` (`"full"` or a part), else `include` (the full view), else the
    /// compact view.
    pub fn detail(&self) -> SchemaDetail {
        match self.detail.as_deref().map(str::trim) {
            Some("full") => SchemaDetail::View(Detail::Full),
            Some("") => SchemaDetail::View(Detail::Compact),
            Some(part) => SchemaDetail::Part(part.to_string()),
            None if !self.include.is_empty() => SchemaDetail::View(Detail::Full),
            None => SchemaDetail::View(Detail::Compact),
        }
    }
}

/// `api_execute`'s arguments: which operation, the request's parts (`call`: validated in
/// place and sent as they are, so the arguments take three forms: the agent's JSON, this
/// struct, the request), and how to shape the answer. Serialized, they are a call an agent can
/// send (a result's `next`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteArgs {
    #[serde(flatten)]
    pub target: Target,
    /// `pathParams`, `query`, `headers`, `body`, `contentType`, `accept`.
    #[serde(flatten)]
    pub call: CallArgs,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// A JMESPath expression applied to the response body before the budget (`select.rs`),
    /// compiled by [`execute`].
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub select: Option<Select>,
    /// How many pages to follow (GET only; default 1, at most `--max-pages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<usize>,
    /// Items of the first page's list to leave out before `select` and the budget: how a
    /// result's `next` resumes inside a page after a cut (GET only, at most
    /// [`MAX_SKIP_ITEMS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_items: Option<usize>,
}

impl ExecuteArgs {
    /// The arguments as the JSON object an agent would send.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }
}

/// Size caps on the arguments that drive matching, ranking and embedding, checked right after
/// parsing and before any of them runs: a 4 MB `path` once took a minute of CPU to match. The
/// flags that set them are `cli::args::LimitArgs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// `--max-path-bytes`.
    pub max_path_bytes: usize,
    /// `--max-query-chars`.
    pub max_query_chars: usize,
    /// `--max-value-bytes`: operationIds, tags, media types and parameter values.
    pub max_value_bytes: usize,
    /// `--max-pages`.
    pub max_pages: usize,
    /// `--max-request-bytes`: the bytes one call may upload, counted decoded.
    pub max_request_bytes: usize,
}

/// Default `--max-pages`.
pub(crate) const DEFAULT_MAX_PAGES: usize = 10;

/// Default of `--max-request-bytes`: 10 MiB.
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;

/// More segments than any API's path template has: a path beyond it cannot name an operation.
pub(crate) const MAX_PATH_SEGMENTS: usize = 64;

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
    pub(crate) fn check_discover(&self, a: &DiscoverArgs) -> Result<(), ToolError> {
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

    pub(crate) fn check_schema(&self, a: &SchemaArgs) -> Result<(), ToolError> {
        let mut over = Vec::new();
        self.name(&mut over, &a.target);
        refuse(over)
    }

    pub(crate) fn check_execute(&self, a: &ExecuteArgs) -> Result<(), ToolError> {
        let mut over = Vec::new();
        self.name(&mut over, &a.target);
        self.text(&mut over, "/contentType", a.call.content_type.as_deref());
        self.text(&mut over, "/accept", a.call.accept.as_deref());
        if let Some(s) = &a.select
            && s.as_str().len() > MAX_SELECT_BYTES
        {
            over.push(at(
                "/select",
                &format!(
                    "{} bytes, over the limit of {MAX_SELECT_BYTES}: select fewer fields",
                    s.as_str().len()
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
        if let Some(n) = a.skip_items
            && n > MAX_SKIP_ITEMS
        {
            over.push(at(
                "/skipItems",
                &format!("{n} items, over the limit of {MAX_SKIP_ITEMS}"),
            ));
        }
        for (part, map) in [
            ("pathParams", &a.call.path_params),
            ("query", &a.call.query),
            ("headers", &a.call.headers),
        ] {
            for (name, value) in map {
                let pointer = format!("/{part}/{}", crate::spec::escape_pointer(name));
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

    /// The size limits of the arguments naming an operation (`operationId`, `path`), as
    /// `api_schema` and `api_execute` apply them.
    pub(crate) fn check_target(&self, a: &Target) -> Result<(), ToolError> {
        let mut over = Vec::new();
        self.name(&mut over, a);
        refuse(over)
    }

    fn name(&self, over: &mut Vec<Violation>, a: &Target) {
        self.text(over, "/operationId", a.operation_id.as_deref());
        let Some(path) = &a.path else { return };
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

impl Target {
    /// The operation the arguments name: `operationId`, else `method` + `path`.
    pub(crate) fn operation_name(&self) -> Result<OperationName<'_>, ToolError> {
        let id = self.operation_id.as_deref();
        if let Some(id) = id.map(str::trim).filter(|s| !s.is_empty()) {
            return Ok(OperationName::Id(id));
        }
        let path = self
            .path
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let (Some(method), Some(path)) = (self.method, path) else {
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

/// Parses `api_discover`'s arguments.
pub fn discover(args: Map<String, Value>) -> Result<DiscoverArgs, ToolError> {
    parse(Tool::Discover, args)
}

/// Parses `api_schema`'s arguments.
pub fn schema(args: Map<String, Value>) -> Result<SchemaArgs, ToolError> {
    parse(Tool::Schema, args)
}

/// Parses `api_execute`'s arguments and compiles `select` (its input schema bounds it to
/// [`MAX_SELECT_BYTES`] characters, so at most four times as many bytes reach the compiler;
/// `InputLimits::check_execute` then holds it to [`MAX_SELECT_BYTES`] bytes).
pub fn execute(args: Map<String, Value>) -> Result<ExecuteArgs, ToolError> {
    let mut args = checked(Tool::Execute, args)?;
    let select = match args.remove("select") {
        Some(Value::String(text)) => Some(Select::parse(&text).map_err(|e| e.to_tool_error())?),
        _ => None,
    };
    let mut parsed: ExecuteArgs = typed(Tool::Execute, args)?;
    parsed.select = select;
    Ok(parsed)
}

/// Validates `args` against `tool`'s input schema, then deserializes them.
fn parse<T: DeserializeOwned>(tool: Tool, args: Map<String, Value>) -> Result<T, ToolError> {
    typed(tool, checked(tool, args)?)
}

/// `args` once they pass `tool`'s input schema (every violation at once). A `null` argument
/// counts as absent; `method` is read in any case.
fn checked(tool: Tool, mut args: Map<String, Value>) -> Result<Map<String, Value>, ToolError> {
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
                "{n} problem{} with the arguments of {} (see `violations`); it takes {takes}",
                if n == 1 { "" } else { "s" },
                tool.name()
            ),
            violations,
        ));
    }
    match value {
        Value::Object(args) => Ok(args),
        _ => unreachable!("built as an object above"),
    }
}

/// Checked arguments deserialized.
fn typed<T: DeserializeOwned>(tool: Tool, args: Map<String, Value>) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| {
        ToolError::invalid(
            format!("the arguments of {} do not fit: {e}", tool.name()),
            vec![at("", &e.to_string())],
        )
    })
}

/// The compiled input schema of `tool`.
fn validator(tool: Tool) -> &'static jsonschema::Validator {
    static VALIDATORS: OnceLock<Vec<jsonschema::Validator>> = OnceLock::new();
    let all = VALIDATORS.get_or_init(|| {
        Tool::ALL
            .iter()
            .map(|&t| {
                jsonschema::validator_for(&defs::input_schema(t))
                    .unwrap_or_else(|e| panic!("the input schema of {} compiles: {e}", t.name()))
            })
            .collect()
    });
    let i = Tool::ALL
        .iter()
        .position(|&t| t == tool)
        .unwrap_or_default();
    &all[i]
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
        assert_eq!(a.target.method, Some(Method::Get));
        assert!(a.call.query.is_empty());
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
        assert_eq!(
            a.target.operation_name().unwrap(),
            OperationName::Id("getPet")
        );
        let a = schema(map(json!({"method": "DELETE", "path": "/pets/1"}))).unwrap();
        assert_eq!(
            a.target.operation_name().unwrap(),
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
            let e = a.target.operation_name().unwrap_err();
            assert!(e.details["violations"].is_array(), "{e}");
        }
    }

    #[test]
    fn discover_takes_words_or_none() {
        // No words: the overview.
        assert_eq!(
            discover(map(json!({"query": "   "}))).unwrap().query.trim(),
            ""
        );
        assert_eq!(discover(map(json!({}))).unwrap().query, "");
        let e = discover(map(json!({"limit": 0, "query": 3}))).unwrap_err();
        let mut p = pointers(&e);
        p.sort();
        assert_eq!(p, ["/limit", "/query"]);
        assert_eq!(
            discover(map(json!({"query": "pets"}))).unwrap().limit(),
            DEFAULT_LIMIT
        );
    }
}
