//! `api_schema`'s view of one operation: what an agent needs to build a call, `$ref`s inlined
//! within a size budget. By default responses are summarised (status, description, and the
//! success body's top-level fields with their types); [`Detail::Full`] gives their schemas.

use serde_json::{Map, Value, json};

use super::Spec;
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

pub fn describe(spec: &Spec, op: &Operation, detail: Detail) -> Value {
    // (request depth, response depth): deep enough to build a call, responses kept short.
    let budgets = [(8, 2), (5, 1), (3, 1), (2, 0), (1, 0)];
    let mut out = Value::Null;
    for (req, resp) in budgets {
        out = render(spec, op, req, resp, detail);
        if out.to_string().len() <= TARGET_BYTES {
            break;
        }
    }
    out
}

/// Nested descriptions longer than this are cut to their first sentence in the compact view.
const NESTED_DESCRIPTION_CHARS: usize = 160;

/// An inlined schema as the view shows it: in the compact view, descriptions nested in the
/// schema keep their first sentence (at most 160 characters); names, types, enums, formats,
/// defaults and `required` are untouched.
fn schema_view(mut schema: Value, detail: Detail) -> Value {
    if detail == Detail::Compact {
        shorten_descriptions(&mut schema);
    }
    schema
}

fn shorten_descriptions(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                match child {
                    Value::String(text) if k == "description" => *text = first_sentence(text),
                    // A property may be called "description": walk into its schema.
                    other => shorten_descriptions(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(shorten_descriptions),
        _ => {}
    }
}

/// The first sentence of `text`, at most [`NESTED_DESCRIPTION_CHARS`] characters.
fn first_sentence(text: &str) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '.' && text[i + 1..].starts_with(|n: char| n.is_whitespace()) || c == '\n'
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    let sentence = text[..end].trim();
    if sentence.chars().count() <= NESTED_DESCRIPTION_CHARS {
        let cut = sentence.len() < text.trim().len();
        return if cut {
            format!("{sentence} …")
        } else {
            sentence.to_string()
        };
    }
    let mut s: String = sentence.chars().take(NESTED_DESCRIPTION_CHARS).collect();
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
) -> Value {
    let req = InlineBudget { depth: req_depth };
    let parameters: Vec<Value> = op
        .parameters
        .iter()
        .map(|p| {
            let mut v = json!({
                "name": p.name,
                "in": p.location.as_str(),
                "required": p.required,
                "schema": schema_view(spec.inline(&p.schema, req), detail),
            });
            if let Some(d) = &p.description {
                v["description"] = Value::String(cut(d));
            }
            if p.deprecated {
                v["deprecated"] = Value::Bool(true);
            }
            if p.location == super::ParamIn::Query && (p.style != "form" || !p.explode) {
                v["style"] = Value::String(p.style.clone());
                v["explode"] = Value::Bool(p.explode);
            }
            v
        })
        .collect();
    let mut out = json!({
        "operationId": op.id,
        "method": op.method,
        "path": op.path,
        "mutating": op.mutating(),
        "deprecated": op.deprecated,
        "tags": op.tags,
    });
    if let Some(s) = &op.summary {
        out["summary"] = Value::String(s.clone());
    }
    if let Some(d) = &op.description {
        out["description"] = Value::String(cut(d));
    }
    out["serverUrl"] = op
        .servers
        .first()
        .map_or(Value::Null, |s| Value::String(s.clone()));
    out["parameters"] = Value::Array(parameters);
    if let Some(body) = &op.request_body {
        let mut b = json!({"required": body.required});
        if let Some(m) = body.preferred() {
            b["contentType"] = Value::String(m.content_type.clone());
            b["schema"] = schema_view(spec.inline(&m.schema, req), detail);
        }
        if let Some(d) = &body.description {
            b["description"] = Value::String(cut(d));
        }
        let others: Vec<&str> = body
            .content
            .iter()
            .map(|m| m.content_type.as_str())
            .filter(|ct| Some(*ct) != body.preferred().map(|m| m.content_type.as_str()))
            .collect();
        if !others.is_empty() {
            // api_execute's `contentType` picks one instead of the first.
            b["otherContentTypes"] = json!(others);
        }
        out["requestBody"] = b;
    }
    let mut responses = Map::new();
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
                Detail::Compact => v["shape"] = shape(spec, schema),
            }
        }
        responses.insert(r.status.clone(), v);
    }
    out["responses"] = Value::Object(responses);
    if op.response_types.len() > 1 {
        // api_execute's `accept` picks one (GitHub: a commit as a diff or a patch).
        out["accept"] = json!(op.response_types);
    }
    if detail == Detail::Compact && op.responses.iter().any(|r| r.schema.is_some()) {
        out["responsesDetail"] = Value::String(
            "responses show the success body's top-level fields; call api_schema again with \
             include: [\"responses\"] for the full response schemas"
                .into(),
        );
    }
    if let Some(p) = op.parameters.iter().find(|p| {
        p.location == super::ParamIn::Header && p.name.eq_ignore_ascii_case("idempotency-key")
    }) {
        out["idempotencyKey"] = Value::String(format!(
            "send a unique {} header: if the call fails without an answer, repeating it with the \
             same value cannot apply it twice",
            p.name
        ));
    }
    if let Some(s) = &op.security {
        out["security"] = s.clone();
    }
    if !op.required_features.is_empty() {
        out["requiredFeatures"] = json!(op.required_features);
    }
    out
}
