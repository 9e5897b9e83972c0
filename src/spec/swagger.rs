//! Swagger 2.0 in the OpenAPI 3 model: a body or form parameters as a request body, a
//! non-body parameter's schema, the server URL from `host`/`basePath`/`schemes`.

use serde_json::{Map, Value, json};

use super::operation::{MediaType, RequestBody};
use super::text;

/// The request body of an operation: its `in: body` parameter, else its `in: formData`
/// parameters as one object schema (multipart when one is a file), under each type it consumes
/// (`default_consumes`: the document's).
pub(super) fn body(
    op: &Map<String, Value>,
    default_consumes: &[String],
    body: &[&Map<String, Value>],
    form: &[&Map<String, Value>],
) -> Option<RequestBody> {
    let consumes = match op.get("consumes") {
        Some(c) => strings(Some(c)),
        None => default_consumes.to_vec(),
    };
    if let Some(b) = body.first() {
        let schema = b.get("schema").cloned().unwrap_or_else(|| json!({}));
        let types: Vec<String> = if consumes.is_empty() {
            vec!["application/json".into()]
        } else {
            consumes
        };
        return Some(RequestBody {
            required: b.get("required").and_then(Value::as_bool).unwrap_or(false),
            description: b
                .get("description")
                .and_then(Value::as_str)
                .map(text::plain),
            content: media_types(types, &schema),
        });
    }
    if form.is_empty() {
        return None;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut has_file = false;
    for p in form {
        let Some(name) = p.get("name").and_then(Value::as_str) else {
            continue;
        };
        has_file |= p.get("type").and_then(Value::as_str) == Some("file");
        let mut schema = param_schema(p);
        if let (Some(d), Value::Object(m)) = (p.get("description"), &mut schema) {
            m.insert(
                "description".into(),
                Value::String(text::plain(d.as_str().unwrap_or_default())),
            );
        }
        properties.insert(name.to_string(), schema);
        if p.get("required").and_then(Value::as_bool).unwrap_or(false) {
            required.push(Value::String(name.to_string()));
        }
    }
    let any_required = !required.is_empty();
    let schema = json!({"type": "object", "properties": properties, "required": required});
    let mut types: Vec<String> = consumes
        .into_iter()
        .filter(|c| {
            c.starts_with("application/x-www-form-urlencoded")
                || c.starts_with("multipart/form-data")
        })
        .collect();
    if types.is_empty() {
        types.push(
            if has_file {
                "multipart/form-data"
            } else {
                "application/x-www-form-urlencoded"
            }
            .into(),
        );
    }
    Some(RequestBody {
        required: any_required,
        description: None,
        content: media_types(types, &schema),
    })
}

/// One media type of `schema` for each of `types`.
fn media_types(types: Vec<String>, schema: &Value) -> Vec<MediaType> {
    types
        .into_iter()
        .map(|content_type| MediaType {
            content_type,
            schema: schema.clone(),
            part_types: Vec::new(),
        })
        .collect()
}

/// Schema keywords a Swagger 2.0 non-body parameter carries on itself.
const SCHEMA_KEYS: [&str; 17] = [
    "type",
    "format",
    "items",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "x-nullable",
];

/// The schema of a non-body parameter, from the keywords it carries on itself.
pub(super) fn param_schema(p: &Map<String, Value>) -> Value {
    let mut schema = Map::new();
    for k in SCHEMA_KEYS {
        if let Some(v) = p.get(k) {
            schema.insert(k.to_string(), v.clone());
        }
    }
    // A file is a binary string, as OpenAPI 3 says it: `api_execute` takes its bytes as
    // `{"base64": …}` and sends it as a file part.
    if schema.get("type").and_then(Value::as_str) == Some("file") {
        schema.insert("type".into(), Value::String("string".into()));
        schema.insert("format".into(), Value::String("binary".into()));
        schema.insert("description".into(), Value::String("file contents".into()));
    }
    Value::Object(schema)
}

/// The server URL of `host`, `basePath` and `schemes` (https when it is among them).
pub(super) fn servers(root: &Value) -> Vec<String> {
    let base = root.get("basePath").and_then(Value::as_str).unwrap_or("");
    let base = if base == "/" {
        ""
    } else {
        base.trim_end_matches('/')
    };
    match root.get("host").and_then(Value::as_str) {
        Some(host) => {
            let schemes = strings(root.get("schemes"));
            let scheme = if schemes.iter().any(|s| s == "https") || schemes.is_empty() {
                "https"
            } else {
                schemes[0].as_str()
            };
            vec![format!("{scheme}://{host}{base}")]
        }
        None if !base.is_empty() => vec![base.to_string()],
        None => Vec::new(),
    }
}

/// A list of strings (`consumes`, `produces`, `schemes`, `x-required-features`); a lone string
/// is a list of one.
pub(super) fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}
