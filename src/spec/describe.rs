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
    out["responses"] = Value::Object(responses);
    if op.response_types.len() > 1 {
        // api_execute's `accept` picks one (GitHub: a commit as a diff or a patch).
        out["accept"] = json!(op.response_types);
    }
    if detail == Detail::Compact
        && (op.request_body.is_some() || op.responses.iter().any(|r| r.schema.is_some()))
    {
        out["responsesDetail"] = Value::String(
            "compact: success bodies as top-level fields, deep descriptions shortened; \
             include: [\"responses\"] shows all"
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
