//! The arguments of `api_execute` for one operation: their JSON Schema (`pathParams`, `query`,
//! `headers`, `body`), OpenAPI 3.0 / Swagger quirks rewritten so the `jsonschema` crate
//! (draft 2020-12) validates them as the document means, lenient coercion of string-typed
//! scalars, and validation reporting every violation with its JSON pointer.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::operation::{Operation, ParamIn};
use super::refs::{self, follow};
use super::security::SchemeKind;

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
/// document. Header parameters, and query parameters that are credentials
/// ([`super::security::credential_param`]), are never required here: configured upstream
/// credentials may supply them (the request builder checks what is still missing).
pub fn schema(op: &Operation, schemes: &BTreeMap<String, SchemeKind>) -> Value {
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
            if p.required
                && location != ParamIn::Header
                && super::security::credential_param(schemes, op, p).is_none()
            {
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
    pub fn build(
        root: &Value,
        schemes: &BTreeMap<String, SchemeKind>,
        op: &Operation,
    ) -> ArgsValidator {
        let mut bundled = refs::bundle_schema(root, &schema(op, schemes));
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
                        pointer: format!("{pointer}/{}", super::refs::escape(name)),
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

/// Loosens path, query and header values (the wire is text there, so the request is the same)
/// into what their schema asks for, since agents write them either way: `"42"` → `42` for an
/// integer, `"true"` → `true` for a boolean, `5` → `"5"` for a string, and one value where
/// the schema is a list of scalars → a list of one (`status: "available"` for petstore's
/// `findByStatus`), each item loosened the same way. Anything it cannot convert is left for
/// validation to report. Bodies are never touched: there the JSON is what is sent.
pub(crate) fn coerce(root: &Value, op: &Operation, args: &mut Value) {
    for p in &op.parameters {
        let Some(slot) = args
            .get_mut(section(p.location))
            .and_then(|s| s.get_mut(&p.name))
        else {
            continue;
        };
        let (schema, _) = follow(root, &p.schema);
        match schema_type(schema).as_deref() {
            Some("array") => {
                let items = schema.get("items").map(|i| follow(root, i).0);
                let Some(item_type) = items.and_then(schema_type).filter(|t| is_scalar(t)) else {
                    continue;
                };
                if is_scalar_value(slot) {
                    let one = std::mem::take(slot);
                    *slot = Value::Array(vec![one]);
                }
                if let Value::Array(list) = slot {
                    list.iter_mut().for_each(|v| coerce_scalar(&item_type, v));
                }
            }
            Some(t) => coerce_scalar(t, slot),
            None => {}
        }
    }
}

fn is_scalar(ty: &str) -> bool {
    matches!(ty, "string" | "integer" | "number" | "boolean")
}

fn is_scalar_value(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// `v` as the scalar type `ty` asks for, when the text on the wire is the same.
fn coerce_scalar(ty: &str, v: &mut Value) {
    let converted = match (ty, &*v) {
        ("integer", Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
        // `"10"` stays the integer 10: as f64 it would go out as `10.0`.
        ("number", Value::String(s)) => {
            s.trim().parse::<i64>().ok().map(Value::from).or_else(|| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            })
        }
        ("boolean", Value::String(s)) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        // `5.0` is an integer to JSON Schema, and goes out as `5`.
        ("integer", Value::Number(n)) if n.is_f64() => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| Value::from(f as i64)),
        ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        _ => None,
    };
    if let Some(c) = converted {
        *v = c;
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

    /// Each row: a query parameter's schema, the value given, the value validated and sent.
    #[test]
    fn parameters_are_loosened_where_the_wire_is_text_and_bodies_are_not() {
        let rows = [
            // petstore findByStatus
            (
                json!({"type": "array", "items": {"type": "string", "enum": ["available"]}}),
                json!("available"),
                json!(["available"]),
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                json!(["a", "b"]),
                json!(["a", "b"]),
            ),
            (
                json!({"type": "array", "items": {"type": "integer"}}),
                json!("5"),
                json!([5]),
            ),
            (
                json!({"type": "array", "items": {"type": "integer"}}),
                json!(["5", 6]),
                json!([5, 6]),
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                json!(5),
                json!(["5"]),
            ),
            (
                json!({"type": "array", "items": {"$ref": "#/components/schemas/Id"}}),
                json!("7"),
                json!([7]),
            ),
            // A list of objects takes no single value; a non-scalar stays for validation.
            (
                json!({"type": "array", "items": {"type": "object"}}),
                json!("x"),
                json!("x"),
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                json!({"a": 1}),
                json!({"a": 1}),
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                Value::Null,
                Value::Null,
            ),
            (json!({"type": "integer"}), json!(" 42 "), json!(42)),
            (json!({"type": "integer"}), json!("4.5"), json!("4.5")),
            (
                json!({"type": ["number", "null"]}),
                json!("0.5"),
                json!(0.5),
            ),
            (json!({"type": "number"}), json!("NaN"), json!("NaN")),
            (json!({"type": "boolean"}), json!("true"), json!(true)),
            (json!({"type": "boolean"}), json!("yes"), json!("yes")),
            (json!({"type": "string"}), json!(5), json!("5")),
            (json!({"type": "string"}), json!(false), json!("false")),
            (json!({"type": "string"}), json!(["a"]), json!(["a"])),
            (json!({}), json!(5), json!(5)),
        ];
        for (schema, given, want) in rows {
            let doc = json!({
                "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
                "paths": {"/x": {"post": {"operationId": "x",
                    "parameters": [{"name": "q", "in": "query", "schema": schema}],
                    "requestBody": {"content": {"application/json": {"schema": {
                        "type": "object", "properties": {"q": schema}}}}},
                    "responses": {"200": {"description": "ok"}}}}},
                "components": {"schemas": {"Id": {"type": "integer"}}},
            });
            let spec = crate::spec::Spec::from_bytes(doc.to_string().as_bytes(), "t.json").unwrap();
            let op = spec.get("x").unwrap();
            let mut args = json!({"query": {"q": given}, "body": {"q": given}});
            coerce(spec.root(), op, &mut args);
            assert_eq!(args["query"]["q"], want, "{schema} {given}");
            assert_eq!(args["body"]["q"], given, "a body stays as given: {schema}");
        }
    }

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
