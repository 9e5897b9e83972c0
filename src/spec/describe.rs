//! `api_schema`'s view of one operation: what an agent needs to build a call, `$ref`s inlined
//! within a size budget. By default responses are summarised (status, description, and the
//! success body's top-level fields with their types); [`Detail::Full`] gives their schemas.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Spec;
use super::method::Method;
use super::operation::Operation;
use super::refs::InlineBudget;

/// Output beyond this many bytes is retried with shallower inlining.
const TARGET_BYTES: usize = 48 * 1024;
const MAX_DESCRIPTION_CHARS: usize = 2000;

/// How much of the responses `api_schema` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// Status → description, and the success body's top-level fields and their types.
    #[default]
    Compact,
    /// Every success response's schema, inlined.
    Full,
}

/// `api_schema`'s view of one operation, in the order an agent reads it. Schemas stay JSON:
/// they are the document's own, inlined.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationView {
    pub operation_id: String,
    pub method: Method,
    pub path: String,
    /// The call may change data (any method but GET, HEAD and OPTIONS).
    pub mutating: bool,
    pub deprecated: bool,
    pub tags: Vec<String>,
    pub summary: Option<String>,
    pub description: Option<String>,
    /// The server the call goes to, when the operation names one of its own (else null).
    #[serialize_always]
    pub server_url: Option<String>,
    pub parameters: Vec<ParameterView>,
    pub request_body: Option<BodyView>,
    /// Status → description; the success body's top-level fields (`shape`), or its schema
    /// with `include`.
    pub responses: Map<String, Value>,
    /// The response media types `api_execute`'s `accept` may ask for.
    pub accept: Option<Vec<String>>,
    pub responses_detail: Option<String>,
    pub idempotency_key: Option<String>,
    /// Which credentials the operation accepts, and whether apigate supplies them.
    pub security: Option<Value>,
    pub required_features: Option<Vec<String>>,
}

/// One parameter of [`OperationView`].
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParameterView {
    pub name: String,
    /// `path`, `query`, `header` or `cookie`.
    #[serde(rename = "in")]
    pub location: &'static str,
    pub required: bool,
    pub schema: Value,
    pub description: Option<String>,
    pub deprecated: Option<bool>,
    pub style: Option<String>,
    pub explode: Option<bool>,
}

/// The request body of [`OperationView`].
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BodyView {
    pub required: bool,
    pub content_type: Option<String>,
    pub schema: Option<Value>,
    pub description: Option<String>,
    /// The other media types the body may be sent as (`api_execute`'s `contentType`).
    pub other_content_types: Option<Vec<String>>,
}

pub fn describe(spec: &Spec, op: &Operation, detail: Detail) -> OperationView {
    // (request depth, response depth): deep enough to build a call, responses kept short.
    let budgets = [(8, 2), (5, 1), (3, 1), (2, 0)];
    for (req, resp) in budgets {
        let out = render(spec, op, req, resp, detail);
        if serde_json::to_vec(&out).map_or(0, |b| b.len()) <= TARGET_BYTES {
            return out;
        }
    }
    render(spec, op, 1, 0, detail)
}

/// Nested descriptions longer than this are cut to their first sentence in the compact view.
const NESTED_DESCRIPTION_CHARS: usize = 160;
/// Descriptions of fields two levels down (`metadata.name`) keep at most this much.
const DEEP_DESCRIPTION_CHARS: usize = 80;
/// Fields this many levels down (`metadata.initializers.pending`) show no description in the
/// compact view: their names, types, enums, formats, limits and `required` remain.
const NO_DESCRIPTION_DEPTH: usize = 3;

/// An inlined schema as the view shows it. In the compact view descriptions get shorter with
/// depth (the first sentence at the top, at most 80 characters two levels down, none below)
/// and vendor extensions (`x-…`) are left out; names, types, enums, formats, defaults, limits
/// and `required` are untouched. [`Detail::Full`] shows the schema as inlined.
fn schema_view(mut schema: Value, detail: Detail) -> Value {
    if detail == Detail::Compact {
        compact(&mut schema, 0);
    }
    schema
}

/// `depth` counts `properties` levels: a body's own fields are at depth 1. Array items and
/// `allOf`/`anyOf`/`oneOf` branches stay at their parent's depth.
fn compact(schema: &mut Value, depth: usize) {
    let Value::Object(map) = schema else {
        if let Value::Array(items) = schema {
            items.iter_mut().for_each(|s| compact(s, depth));
        }
        return;
    };
    let is_array = map.get("type").and_then(Value::as_str) == Some("array");
    // Vendor extensions, and `uniqueItems` where there are no items (Kubernetes puts it on
    // every string parameter), say nothing about how to build the request.
    map.retain(|k, _| !k.starts_with("x-") && (k != "uniqueItems" || is_array));
    if let Some(Value::String(text)) = map.get_mut("description") {
        match depth {
            d if d >= NO_DESCRIPTION_DEPTH => {
                map.remove("description");
            }
            d if d >= 2 => *text = shorten(text, DEEP_DESCRIPTION_CHARS),
            _ => *text = shorten(text, NESTED_DESCRIPTION_CHARS),
        }
    }
    for (k, child) in map.iter_mut() {
        match k.as_str() {
            "properties" | "patternProperties" => {
                if let Value::Object(fields) = child {
                    fields.values_mut().for_each(|f| compact(f, depth + 1));
                }
            }
            "additionalProperties" => compact(child, depth + 1),
            "items" | "allOf" | "anyOf" | "oneOf" | "not" => compact(child, depth),
            _ => {}
        }
    }
}

/// The first sentence of `text`, at most `max` characters.
fn shorten(text: &str, max: usize) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '.' && text[i + 1..].starts_with(|n: char| n.is_whitespace()) || c == '\n'
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    let sentence = text[..end].trim();
    if sentence.chars().count() <= max {
        let cut = sentence.len() < text.trim().len();
        return if cut {
            format!("{sentence} …")
        } else {
            sentence.to_string()
        };
    }
    let mut s: String = sentence.chars().take(max).collect();
    s.push('…');
    s
}

/// A schema's top level for an agent reading a response: an object's property names with
/// their types, an array's item fields, or the type alone.
fn shape(spec: &Spec, schema: &Value) -> Value {
    let top = spec.inline(schema, InlineBudget { depth: 2 });
    let fields = |s: &Value| -> Option<Value> {
        let props = s.get("properties")?.as_object()?;
        Some(Value::Object(
            props
                .iter()
                .map(|(name, p)| (name.clone(), Value::String(type_label(p))))
                .collect(),
        ))
    };
    if let Some(items) = top.get("items") {
        let mut out = json!({"type": "array"});
        match fields(items) {
            Some(f) => out["items"] = json!({"type": "object", "properties": f}),
            None => out["items"] = Value::String(type_label(items)),
        }
        return out;
    }
    match fields(&top) {
        Some(f) => json!({"type": "object", "properties": f}),
        None => Value::String(type_label(&top)),
    }
}

/// `string`, `integer (int64)`, `array of object`, `string|null`, `object (Pet)`, …
fn type_label(schema: &Value) -> String {
    if let Some(Value::String(name)) = schema
        .get("$truncated")
        .or_else(|| schema.get("$recursive"))
    {
        return format!("object ({name})");
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if schema.get("properties").is_some() => "object".into(),
        _ if schema.get("items").is_some() => "array".into(),
        _ => {
            let alternatives = ["anyOf", "oneOf", "allOf"]
                .iter()
                .find_map(|k| schema.get(*k).and_then(Value::as_array));
            match alternatives {
                Some(list) => list.iter().map(type_label).collect::<Vec<_>>().join(" or "),
                None => "any".into(),
            }
        }
    };
    if kind == "array"
        && let Some(items) = schema.get("items")
    {
        return format!("array of {}", type_label(items));
    }
    match schema.get("format").and_then(Value::as_str) {
        Some(f) => format!("{kind} ({f})"),
        None => kind,
    }
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_DESCRIPTION_CHARS).collect();
    s.push('…');
    s
}

fn render(
    spec: &Spec,
    op: &Operation,
    req_depth: usize,
    resp_depth: usize,
    detail: Detail,
) -> OperationView {
    let req = InlineBudget { depth: req_depth };
    let parameters = op
        .parameters
        .iter()
        .map(|p| {
            let styled = p.location == super::ParamIn::Query && (p.style != "form" || !p.explode);
            ParameterView {
                name: p.name.clone(),
                location: p.location.as_str(),
                required: p.required,
                schema: schema_view(spec.inline(&p.schema, req), detail),
                description: p.description.as_deref().map(cut),
                deprecated: p.deprecated.then_some(true),
                style: styled.then(|| p.style.clone()),
                explode: styled.then_some(p.explode),
            }
        })
        .collect();
    let request_body = op.request_body.as_ref().map(|body| {
        let preferred = body.preferred();
        let others: Vec<String> = body
            .content
            .iter()
            .map(|m| m.content_type.as_str())
            .filter(|ct| Some(*ct) != preferred.map(|m| m.content_type.as_str()))
            .map(str::to_string)
            .collect();
        BodyView {
            required: body.required,
            content_type: preferred.map(|m| m.content_type.clone()),
            schema: preferred.map(|m| schema_view(spec.inline(&m.schema, req), detail)),
            description: body.description.as_deref().map(cut),
            // api_execute's `contentType` picks one instead of the first.
            other_content_types: (!others.is_empty()).then_some(others),
        }
    });
    let mut responses = Map::new();
    let mut shapes: Vec<(String, Value)> = Vec::new();
    for r in &op.responses {
        let mut v = json!({});
        if let Some(d) = &r.description {
            v["description"] = Value::String(cut(d));
        }
        let success = r.status.starts_with('2') || r.status == "default" && op.responses.len() == 1;
        if let (true, Some(schema)) = (success, &r.schema) {
            if let Some(ct) = &r.content_type {
                v["contentType"] = Value::String(ct.clone());
            }
            match detail {
                Detail::Full => {
                    v["schema"] = spec.inline(schema, InlineBudget { depth: resp_depth });
                }
                Detail::Compact => {
                    let shape = shape(spec, schema);
                    // 200 and 201 often return the same thing: say so instead of repeating it.
                    let same = shapes.iter().find(|(_, s)| *s == shape).map(|(st, _)| st);
                    v["shape"] = match same {
                        Some(status) => Value::String(format!("as {status}")),
                        None => shape.clone(),
                    };
                    shapes.push((r.status.clone(), shape));
                }
            }
        }
        responses.insert(r.status.clone(), v);
    }
    let compact_note = detail == Detail::Compact
        && (op.request_body.is_some() || op.responses.iter().any(|r| r.schema.is_some()));
    let idempotency_key = op.parameters.iter().find(|p| {
        p.location == super::ParamIn::Header && p.name.eq_ignore_ascii_case("idempotency-key")
    });
    OperationView {
        operation_id: op.id.clone(),
        method: op.method,
        path: op.path.clone(),
        mutating: op.mutating(),
        deprecated: op.deprecated,
        tags: op.tags.clone(),
        summary: op.summary.clone(),
        description: op.description.as_deref().map(cut),
        server_url: op.servers.first().cloned(),
        parameters,
        request_body,
        responses,
        // api_execute's `accept` picks one (GitHub: a commit as a diff or a patch).
        accept: (op.response_types.len() > 1).then(|| op.response_types.clone()),
        responses_detail: compact_note.then(|| {
            "compact: success bodies as top-level fields, deep descriptions shortened; \
             include: [\"responses\"] shows all"
                .to_string()
        }),
        idempotency_key: idempotency_key.map(|p| {
            format!(
                "send a unique {} header: if the call fails without an answer, repeating it \
                 with the same value cannot apply it twice",
                p.name
            )
        }),
        security: op.security.clone(),
        required_features: (!op.required_features.is_empty()).then(|| op.required_features.clone()),
    }
}
