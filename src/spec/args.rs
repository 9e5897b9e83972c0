//! The arguments of `api_execute` for one operation: their JSON Schema (`pathParams`, `query`,
//! `headers`, `body`), OpenAPI 3.0 / Swagger quirks rewritten so the `jsonschema` crate
//! (draft 2020-12) validates them as the document means, lenient coercion of string-typed
//! scalars, and validation reporting every violation with its JSON pointer.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::operation::{Operation, ParamIn};
use super::refs::{self, follow};

/// One reason the arguments do not match the operation's schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// JSON pointer into the arguments (`/pathParams/petId`, `/body/name`).
    pub pointer: String,
    pub message: String,
}

/// The argument section a parameter belongs to.
pub fn section(location: ParamIn) -> &'static str {
    match location {
        ParamIn::Path => "pathParams",
        ParamIn::Query => "query",
        ParamIn::Header => "headers",
        ParamIn::Cookie => "cookies",
    }
}

/// The JSON Schema of `{pathParams, query, headers, body}` for `op`, with `$ref`s as in the
/// document. Header parameters are never required here: configured upstream credentials may
/// supply them (the request builder checks what is still missing).
pub fn schema(op: &Operation) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for location in [ParamIn::Path, ParamIn::Query, ParamIn::Header] {
        let params: Vec<_> = op
            .parameters
            .iter()
            .filter(|p| p.location == location)
            .collect();
        if params.is_empty() {
            continue;
        }
        let mut props = Map::new();
        let mut req = Vec::new();
        for p in &params {
            props.insert(p.name.clone(), p.schema.clone());
            if p.required && location != ParamIn::Header {
                req.push(Value::String(p.name.clone()));
            }
        }
        let name = section(location);
        if !req.is_empty() {
            required.push(Value::String(name.into()));
        }
        properties.insert(
            name.into(),
            json!({"type": "object", "properties": props, "required": req, "additionalProperties": false}),
        );
    }
    if let Some(body) = &op.request_body {
        let schema = body
            .preferred()
            .map(|m| m.schema.clone())
            .unwrap_or_else(|| json!({}));
        properties.insert("body".into(), schema);
        if body.required {
            required.push(Value::String("body".into()));
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

/// Rewrites OpenAPI 3.0 / Swagger 2.0 schema dialect to draft 2020-12, in place:
/// `nullable`/`x-nullable`, boolean `exclusiveMinimum`/`exclusiveMaximum`, `type: file`, and
/// `readOnly` properties listed as `required` (they are never sent in requests).
pub(crate) fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for key in ["exclusiveMinimum", "exclusiveMaximum"] {
                if let Some(Value::Bool(b)) = map.get(key) {
                    let bound = if key == "exclusiveMinimum" {
                        "minimum"
                    } else {
                        "maximum"
                    };
                    if *b && let Some(limit) = map.remove(bound) {
                        map.insert(key.into(), limit);
                    } else {
                        map.remove(key);
                    }
                }
            }
            if map.get("type").and_then(Value::as_str) == Some("file") {
                map.remove("type");
            }
            drop_read_only_required(map);
            let nullable = [map.remove("nullable"), map.remove("x-nullable")]
                .into_iter()
                .flatten()
                .any(|n| n == Value::Bool(true));
            for child in map.values_mut() {
                normalize(child);
            }
            if nullable {
                make_nullable(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn drop_read_only_required(map: &mut Map<String, Value>) {
    let read_only: Vec<String> = match map.get("properties") {
        Some(Value::Object(props)) => props
            .iter()
            .filter(|(_, s)| s.get("readOnly") == Some(&Value::Bool(true)))
            .map(|(k, _)| k.clone())
            .collect(),
        _ => return,
    };
    if let (false, Some(Value::Array(req))) = (read_only.is_empty(), map.get_mut("required")) {
        req.retain(|r| !r.as_str().is_some_and(|r| read_only.iter().any(|p| p == r)));
    }
}

fn make_nullable(v: &mut Value) {
    let Value::Object(map) = v else { return };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.contains(&json!("null")) {
                types.push(json!("null"));
            }
        }
        _ => {
            let inner = std::mem::take(map);
            *v = json!({"anyOf": [Value::Object(inner), {"type": "null"}]});
            return;
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

/// A compiled validator for one operation's arguments.
pub(crate) struct ArgsValidator {
    validator: Option<jsonschema::Validator>,
}

impl ArgsValidator {
    /// Bundles the operation's argument schema against `root`, normalizes and compiles it.
    /// Patterns the regex engine rejects are dropped rather than failing the whole operation.
    pub fn build(root: &Value, op: &Operation) -> ArgsValidator {
        let mut bundled = refs::bundle_schema(root, &schema(op));
        normalize(&mut bundled);
        let compile = |s: &Value| {
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(false)
                .build(s)
        };
        let validator = match compile(&bundled) {
            Ok(v) => Some(v),
            Err(first) => {
                strip_key(&mut bundled, "pattern");
                match compile(&bundled) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!(operation = %op.id, error = %first, retry = %e,
                            "argument schema does not compile; only required parameters are checked");
                        None
                    }
                }
            }
        };
        ArgsValidator { validator }
    }

    /// Every violation of `args` (the `{pathParams, query, headers, body}` object).
    pub fn validate(&self, args: &Value) -> Vec<Violation> {
        let Some(v) = &self.validator else {
            return Vec::new();
        };
        violations(v, args)
    }
}

/// The most enum values a violation lists.
const MAX_ENUM_SHOWN: usize = 20;

/// Every violation of `instance` against `validator`, each with its JSON pointer: an unknown
/// property is named at its own pointer, an enum violation lists the allowed values (up to
/// twenty), other messages are cut at 300 characters.
pub fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    for e in validator.iter_errors(instance) {
        let pointer = e.instance_path().to_string();
        match e.kind() {
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                for name in unexpected {
                    out.push(Violation {
                        pointer: format!("{pointer}/{}", escape_pointer(name)),
                        message: format!("unknown property {name:?}"),
                    });
                }
            }
            jsonschema::error::ValidationErrorKind::Enum { options } => {
                let all = options.as_array().cloned().unwrap_or_default();
                let mut shown: Vec<String> = all
                    .iter()
                    .take(MAX_ENUM_SHOWN)
                    .map(Value::to_string)
                    .collect();
                if all.len() > MAX_ENUM_SHOWN {
                    shown.push(format!(
                        "… ({} values in all; api_schema lists them)",
                        all.len()
                    ));
                }
                out.push(Violation {
                    pointer,
                    message: format!(
                        "{} is not one of the allowed values: {}",
                        cut(&e.instance().to_string(), 100),
                        shown.join(", ")
                    ),
                });
            }
            _ => out.push(Violation {
                pointer,
                message: cut(&e.to_string(), 300),
            }),
        }
    }
    out
}

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// `text` cut at `max` bytes (on a character boundary), with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}

fn strip_key(v: &mut Value, key: &str) {
    match v {
        Value::Object(map) => {
            if map.get(key).is_some_and(Value::is_string) {
                map.remove(key);
            }
            map.values_mut().for_each(|c| strip_key(c, key));
        }
        Value::Array(items) => items.iter_mut().for_each(|c| strip_key(c, key)),
        _ => {}
    }
}

/// Turns string values of scalar parameters into the number or boolean their schema asks for
/// (`"42"` → `42` for an integer path parameter), since agents often send path and query
/// values as strings. Leaves anything it cannot convert for validation to report.
pub(crate) fn coerce(root: &Value, op: &Operation, args: &mut Value) {
    for p in &op.parameters {
        let Some(slot) = args
            .get_mut(section(p.location))
            .and_then(|s| s.get_mut(&p.name))
        else {
            continue;
        };
        let (schema, _) = follow(root, &p.schema);
        let ty = schema_type(schema);
        if let Value::String(s) = slot {
            let s = s.trim();
            let converted = match ty.as_deref() {
                Some("integer") => s.parse::<i64>().ok().map(Value::from),
                // `"10"` stays the integer 10: as f64 it would go out as `10.0`.
                Some("number") => s.parse::<i64>().ok().map(Value::from).or_else(|| {
                    s.parse::<f64>()
                        .ok()
                        .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                }),
                Some("boolean") => match s {
                    "true" => Some(Value::Bool(true)),
                    "false" => Some(Value::Bool(false)),
                    _ => None,
                },
                _ => None,
            };
            if let Some(c) = converted {
                *slot = c;
            }
        }
    }
}

fn schema_type(schema: &Value) -> Option<String> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openapi_30_quirks_become_2020_12() {
        let mut s = json!({"type": "string", "nullable": true, "enum": ["a"]});
        normalize(&mut s);
        assert_eq!(s, json!({"type": ["string", "null"], "enum": ["a", null]}));
        let mut s = json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true});
        normalize(&mut s);
        assert_eq!(s, json!({"type": "integer", "exclusiveMinimum": 0}));
        let mut s = json!({"allOf": [{"$ref": "#/x"}], "nullable": true});
        normalize(&mut s);
        assert_eq!(
            s,
            json!({"anyOf": [{"allOf": [{"$ref": "#/x"}]}, {"type": "null"}]})
        );
        let mut s = json!({"type": "object", "required": ["id", "name"],
            "properties": {"id": {"type": "integer", "readOnly": true}, "name": {"type": "string"}}});
        normalize(&mut s);
        assert_eq!(s["required"], json!(["name"]));
    }
}
