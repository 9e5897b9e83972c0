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
}

impl SchemaArgs {
    /// How much of the responses to show.
    pub fn detail(&self) -> Detail {
        if self.include.contains(&Include::Responses) {
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
