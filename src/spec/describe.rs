//! `api_schema`'s view of one operation: what an agent needs to build a call, `$ref`s inlined
//! within a size budget.

use serde_json::{Map, Value, json};

use super::Spec;
use super::operation::Operation;
use super::refs::InlineBudget;

/// Output beyond this many bytes is retried with shallower inlining.
const TARGET_BYTES: usize = 48 * 1024;
const MAX_DESCRIPTION_CHARS: usize = 2000;

pub fn describe(spec: &Spec, op: &Operation) -> Value {
    // (request depth, response depth): deep enough to build a call, responses kept short.
    let budgets = [(8, 2), (5, 1), (3, 1), (2, 0), (1, 0)];
    let mut out = Value::Null;
    for (req, resp) in budgets {
        out = render(spec, op, req, resp);
        if out.to_string().len() <= TARGET_BYTES {
            break;
        }
    }
    out
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_DESCRIPTION_CHARS).collect();
    s.push('…');
    s
}

fn render(spec: &Spec, op: &Operation, req_depth: usize, resp_depth: usize) -> Value {
    let req = InlineBudget { depth: req_depth };
    let parameters: Vec<Value> = op
        .parameters
        .iter()
        .map(|p| {
            let mut v = json!({
                "name": p.name,
                "in": p.location.as_str(),
                "required": p.required,
                "schema": spec.inline(&p.schema, req),
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
            b["schema"] = spec.inline(&m.schema, req);
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
            v["schema"] = spec.inline(schema, InlineBudget { depth: resp_depth });
        }
        responses.insert(r.status.clone(), v);
    }
    out["responses"] = Value::Object(responses);
    if let Some(s) = &op.security {
        out["security"] = s.clone();
    }
    if !op.required_features.is_empty() {
        out["requiredFeatures"] = json!(op.required_features);
    }
    out
}
