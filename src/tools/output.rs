//! What the three tools return, as types: the JSON an agent reads is their `Serialize` form,
//! and the `outputSchema` each tool publishes is derived from the same types (schemars), so
//! the two cannot drift and no adapter parses a result back to learn what it holds.

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ToolError;
use crate::spec::{Method, OperationView};
use crate::types::{Code, Tool};
use crate::upstream::{Cut, UpstreamResponse};

/// One finished tool call's result; it serializes as the result it holds.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Output {
    Discover(DiscoverResult),
    Schema(Box<SchemaResult>),
    SchemaPart(Box<SchemaPart>),
    Execute(Box<ExecuteResult>),
    DryRun(DryRunResult),
}

impl Output {
    /// The JSON an agent reads (`structuredContent`).
    pub(crate) fn to_json(&self) -> Value {
        // The types hold strings, numbers and JSON values only: serializing them cannot fail.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// For a sent `api_execute`: whether its method only reads (the result's `_meta`).
    pub fn read_only(&self) -> Option<bool> {
        match self {
            Output::Execute(r) => Some(!r.method.is_mutating()),
            _ => None,
        }
    }
}

/// `api_discover`'s result.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    pub results: Vec<DiscoverHit>,
    /// How many operations matched.
    pub total: usize,
    /// Without a `query`: the APIs and their groups of operations, to search in their words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overview: Option<Vec<ApiOverview>>,
    /// With nothing to show: how many operations match (or, without a query, exist) that this
    /// caller may not see.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<usize>,
    /// Why they are hidden, and the feature that would show them (never naming an API the
    /// caller holds no feature for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One API in `api_discover`'s overview.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiOverview {
    /// The API's name, when the server serves several (the `api` argument takes it).
    pub api: Option<String>,
    pub title: String,
    pub description: Option<String>,
    /// The operations the caller may use.
    pub operations: usize,
    /// Its tags (or, without tags, its paths' first segments), largest first; `tag` takes
    /// a tag's name.
    pub groups: Vec<GroupOverview>,
    /// Groups left out to keep the overview small.
    pub more_groups: Option<usize>,
}

/// A tag (or a path's first segment) and how many operations it has.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupOverview {
    pub name: String,
    pub operations: usize,
    pub description: Option<String>,
}

/// One operation `api_discover` found, best first.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverHit {
    /// `NAME:operationId` when the server serves several APIs (the `api` it belongs to).
    pub operation_id: String,
    pub method: Method,
    pub path: String,
    pub summary: String,
    /// Its tags; left out when they are those of the hit before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Present, and true, when the call may change data (any method but GET, HEAD and
    /// OPTIONS).
    #[serde(default, skip_serializing_if = "is_false")]
    pub mutating: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `api_schema`'s result: the operation's view, with what the caller's credentials allow and
/// a `select` example for its answer.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaResult {
    #[serde(flatten)]
    pub operation: OperationView,
    /// The API the operation belongs to, when the server serves several (its `operationId`
    /// is then `NAME:operationId`).
    pub api: Option<String>,
    /// An example of `api_execute`'s `select` (JMESPath) made of the answer's own fields.
    pub select: Option<String>,
}

/// `api_schema`'s result with `detail` naming a part: that part, whole.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaPart {
    pub operation_id: String,
    pub method: Method,
    pub path: String,
    /// The part, as `detail` named it.
    pub detail: String,
    /// The part whole: a parameter's view, the request body, a response or a field's schema
    /// (`$ref`s inlined), the media types, or the description.
    pub part: Value,
}

/// `api_execute`'s result for a sent call: the API's answer (4xx included: `ok` is false),
/// fitted to the budget, and how to go on.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteResult {
    #[serde(flatten)]
    pub response: UpstreamResponse,
    /// Whole items of the body's list were left out to fit the budget: `shown` of `total`
    /// items of the array at JSON pointer `pointer` ("" for a top-level array); every key
    /// outside that array is kept.
    pub cut: Option<Cut>,
    /// One sentence on what is not shown (or what `select` did not match) and how to get it.
    pub note: Option<String>,
    /// The exact api_execute arguments for the next page (from the Link header or a cursor in
    /// the body): call api_execute with them as they are.
    pub next: Option<Map<String, Value>>,
    /// The API shows a next page that api_execute cannot ask for (the operation declares no
    /// parameter for it): where, its value, and why; there are more items than shown.
    pub continuation: Option<super::paging::Continuation>,
    /// With `pages`: how many were fetched, and `stoppedBecause` when fewer than asked.
    pub pages: Option<PagesFetched>,
    /// `NAME:operationId` when the server serves several APIs.
    pub operation_id: String,
    /// The API it belongs to, when the server serves several.
    pub api: Option<String>,
    pub method: Method,
}

/// How many pages a call with `pages` fetched.
#[serde_with::skip_serializing_none]
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PagesFetched {
    pub fetched: usize,
    /// Why it stopped before the pages asked for (there was no next page, or a page failed).
    pub stopped_because: Option<String>,
}

/// `api_execute`'s result with `dryRun`: the request that would be sent, credentials redacted.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunResult {
    #[schemars(schema_with = "always_true")]
    pub dry_run: bool,
    /// `NAME:operationId` when the server serves several APIs.
    pub operation_id: String,
    /// The API it belongs to, when the server serves several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Method, URL, headers and body as they would be sent.
    pub request: Map<String, Value>,
}

fn always_true(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"const": true})
}

/// A failed call as an agent reads it: `{error, code, …details}`.
#[derive(Serialize, JsonSchema)]
pub(crate) struct ErrorResult<'a> {
    /// What happened and what to do.
    pub error: &'a str,
    pub code: Code,
    #[serde(flatten)]
    pub details: &'a Map<String, Value>,
}

/// The `format`s JSON Schema 2020-12 defines (§7.3 of its validation vocabulary): the only
/// ones a published schema carries. Clients validate with their own libraries, which warn
/// about any other (Ajv: `unknown format "uint" ignored`).
pub(crate) const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// A type's JSON Schema as `outputSchema` shows it: subschemas inline, no `$schema` or titles,
/// and only standard `format`s (schemars writes Rust's integer and float widths, `uint`,
/// `double`, …, which say nothing to an agent).
fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut v = generator.into_root_schema_for::<T>().to_value();
    tidy(&mut v);
    v
}

/// Removes `title` and every `format` that is not standard from a schema and its subschemas,
/// whatever its `type` (`["integer", "null"]` for an `Option<usize>` too).
fn tidy(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("title");
            if map
                .get("format")
                .is_some_and(|f| !f.as_str().is_some_and(|f| STANDARD_FORMATS.contains(&f)))
            {
                map.remove("format");
            }
            for (k, child) in map.iter_mut() {
                match k.as_str() {
                    // Keys here are names (of fields, patterns, definitions), not keywords.
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas" => {
                        if let Value::Object(named) = child {
                            named.values_mut().for_each(tidy);
                        }
                    }
                    // Values, not schemas.
                    "const" | "enum" | "default" | "examples" | "required" => {}
                    _ => tidy(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// A tool's output JSON Schema: what `structuredContent` holds, its result or, with
/// `isError: true`, `{error, code, …details}`.
pub fn output_schema(tool: Tool) -> Value {
    let mut results = match tool {
        Tool::Discover => vec![schema_of::<DiscoverResult>()],
        Tool::Schema => vec![schema_of::<SchemaResult>(), schema_of::<SchemaPart>()],
        Tool::Execute => vec![schema_of::<ExecuteResult>(), schema_of::<DryRunResult>()],
    };
    results.push(schema_of::<ErrorResult<'static>>());
    serde_json::json!({"type": "object", "anyOf": results})
}

impl ToolError {
    /// `{"error": message, "code": CODE, ...details}`.
    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(ErrorResult {
            error: &self.message,
            code: self.code,
            details: &self.details,
        })
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `format` keyword of a schema, at any depth (not a field named `format`).
    fn formats(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(f) = map.get("format") {
                    out.push(f.to_string());
                }
                for (k, child) in map {
                    match k.as_str() {
                        "properties" => child
                            .as_object()
                            .into_iter()
                            .flat_map(|p| p.values())
                            .for_each(|s| formats(s, out)),
                        "const" | "enum" | "default" | "examples" => {}
                        _ => formats(child, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| formats(i, out)),
            _ => {}
        }
    }

    #[test]
    fn output_schemas_carry_only_standard_formats() {
        for tool in Tool::ALL {
            let schema = output_schema(tool);
            let mut found = Vec::new();
            formats(&schema, &mut found);
            let odd: Vec<&String> = found
                .iter()
                .filter(|f| !STANDARD_FORMATS.iter().any(|s| **f == format!("\"{s}\"")))
                .collect();
            assert!(odd.is_empty(), "{}: {odd:?}", tool.name());
        }
        // `moreGroups` is an `Option<usize>`: its type is `["integer", "null"]`.
        let overview = &output_schema(Tool::Discover)["anyOf"][0]["properties"]["overview"];
        let more = &overview["items"]["properties"]["moreGroups"];
        assert_eq!(
            more["type"],
            serde_json::json!(["integer", "null"]),
            "{more}"
        );
        assert!(more.get("format").is_none(), "{more}");
    }

    #[test]
    fn tidy_keeps_standard_formats_and_fields_named_format() {
        let mut v = serde_json::json!({
            "type": "object",
            "title": "T",
            "properties": {
                "format": {"type": "string", "format": "date-time"},
                "n": {"type": ["number", "null"], "format": "double"},
                "e": {"enum": [{"format": "uint"}]}
            }
        });
        tidy(&mut v);
        assert_eq!(
            v,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "format": {"type": "string", "format": "date-time"},
                    "n": {"type": ["number", "null"]},
                    "e": {"enum": [{"format": "uint"}]}
                }
            })
        );
    }
}
