//! Serializing argument values onto the wire: path and query parameters per their OpenAPI
//! `style`/`explode`, and request bodies (JSON, `application/x-www-form-urlencoded` with
//! Stripe-style brackets, `multipart/form-data`, raw text). Pure functions, no I/O.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

/// Everything but RFC 3986 unreserved characters is percent-encoded: a value can never add a
/// path segment (`/`), start a query (`?`), a fragment (`#`), or a parameter (`&`, `=`, `;`).
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Characters escaped in the literal text of a path template (which comes from the document,
/// not from the agent): `/` and existing `%XX` stay as written.
const TEMPLATE_LITERAL: &AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|');

/// Percent-encodes one value or name.
pub(crate) fn enc(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// Escapes literal template text.
pub(crate) fn enc_literal(s: &str) -> String {
    utf8_percent_encode(s, TEMPLATE_LITERAL).to_string()
}

/// The text of a scalar; arrays and objects nested where a scalar is expected become JSON.
pub(crate) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// A path parameter value, already percent-encoded, per `style` (`simple`, `label`, `matrix`).
pub(crate) fn path_value(style: &str, explode: bool, name: &str, value: &Value) -> String {
    let name = enc(name);
    match value {
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|i| enc(&scalar(i))).collect();
            match style {
                "label" if explode => format!(".{}", parts.join(".")),
                "label" => format!(".{}", parts.join(",")),
                "matrix" if explode => parts.iter().map(|p| format!(";{name}={p}")).collect(),
                "matrix" => format!(";{name}={}", parts.join(",")),
                _ => parts.join(","),
            }
        }
        Value::Object(map) => {
            let pairs: Vec<(String, String)> =
                map.iter().map(|(k, v)| (enc(k), enc(&scalar(v)))).collect();
            let kv = |sep: &str| {
                pairs
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(sep)
            };
            let flat = || {
                pairs
                    .iter()
                    .flat_map(|(k, v)| [k.as_str(), v.as_str()])
                    .collect::<Vec<_>>()
                    .join(",")
            };
            match style {
                "label" if explode => format!(".{}", kv(".")),
                "label" => format!(".{}", flat()),
                "matrix" if explode => format!(";{}", kv(";")),
                "matrix" => format!(";{name}={}", flat()),
                _ if explode => kv(","),
                _ => flat(),
            }
        }
        v => {
            let s = enc(&scalar(v));
            match style {
                "label" => format!(".{s}"),
                "matrix" if s.is_empty() => format!(";{name}"),
                "matrix" => format!(";{name}={s}"),
                _ => s,
            }
        }
    }
}

/// A query parameter as `key=value` pieces, already percent-encoded, per `style` (`form`,
/// `spaceDelimited`, `pipeDelimited`, `deepObject`) and `explode`. `null` sends nothing.
pub(crate) fn query_pairs(style: &str, explode: bool, name: &str, value: &Value) -> Vec<String> {
    let key = enc(name);
    match value {
        Value::Null => Vec::new(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|i| enc(&scalar(i))).collect();
            let sep = match style {
                "spaceDelimited" => "%20",
                "pipeDelimited" => "|",
                _ => ",",
            };
            if style == "deepObject" {
                let mut out = Vec::new();
                brackets(&key, value, enc, &mut |k, v| {
                    out.push(format!("{k}={}", enc(&v)))
                });
                out
            } else if explode {
                parts.iter().map(|p| format!("{key}={p}")).collect()
            } else {
                vec![format!("{key}={}", parts.join(sep))]
            }
        }
        Value::Object(map) => {
            if style == "deepObject" {
                let mut out = Vec::new();
                brackets(&key, value, enc, &mut |k, v| {
                    out.push(format!("{k}={}", enc(&v)))
                });
                return out;
            }
            if explode {
                return map
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| format!("{}={}", enc(k), enc(&scalar(v))))
                    .collect();
            }
            let sep = match style {
                "spaceDelimited" => "%20",
                "pipeDelimited" => "|",
                _ => ",",
            };
            let flat: Vec<String> = map
                .iter()
                .flat_map(|(k, v)| [enc(k), enc(&scalar(v))])
                .collect();
            vec![format!("{key}={}", flat.join(sep))]
        }
        v => vec![format!("{key}={}", enc(&scalar(v)))],
    }
}

/// Walks nested objects and arrays as `prefix[key][0]…` (`prefix` as given, nested keys passed
/// through `key`) and hands each leaf to `emit` with its raw text. Empty objects and arrays and
/// `null` become an empty value (`metadata=` is how Stripe clears a field).
fn brackets(
    prefix: &str,
    v: &Value,
    key: fn(&str) -> String,
    emit: &mut dyn FnMut(String, String),
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                brackets(&format!("{prefix}[{}]", key(k)), v, key, emit);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                brackets(&format!("{prefix}[{i}]"), v, key, emit);
            }
        }
        Value::Object(_) | Value::Array(_) | Value::Null => emit(prefix.to_string(), String::new()),
        v => emit(prefix.to_string(), scalar(v)),
    }
}

/// The `(key, value)` pairs of a form body, unencoded: nested objects as `a[b]=1`, arrays as
/// `a[0]=x` (the indexed form Stripe's own client libraries send).
pub(crate) fn form_pairs(body: &Map<String, Value>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (k, v) in body {
        brackets(k, v, str::to_string, &mut |key, value| {
            pairs.push((key, value))
        });
    }
    pairs
}

/// An `application/x-www-form-urlencoded` body.
pub(crate) fn form_body(body: &Map<String, Value>) -> String {
    let mut ser = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_pairs(body) {
        ser.append_pair(&k, &v);
    }
    ser.finish()
}

/// The media type of a file part that names none.
pub(crate) const DEFAULT_PART_TYPE: &str = "application/octet-stream";

/// A `multipart/form-data` body with one part per top-level field, in the body's order: a
/// field `files` names becomes its file part(s) (`filename`, default the field name, and
/// `Content-Type`, default `application/octet-stream`), any other a text part (objects and
/// arrays as JSON parts). Returns the bytes and the boundary. Field names lose quotes and line
/// breaks; filenames and part types were checked when the call was typed.
pub(crate) fn multipart_body(
    body: &Map<String, Value>,
    files: &[(String, super::upload::Upload)],
) -> (Vec<u8>, String) {
    let boundary = format!("apigate-{}", uuid::Uuid::new_v4().simple());
    let size: usize = files.iter().map(|(_, f)| f.bytes.len() + 256).sum();
    let mut out = Vec::with_capacity(size + 256 * body.len());
    let clean = |s: &str| s.replace(['"', '\r', '\n'], "_");
    for (k, v) in body {
        let name = clean(k);
        let mut sent_files = false;
        for (_, file) in files.iter().filter(|(field, _)| field == k) {
            sent_files = true;
            let filename = clean(file.filename.as_deref().unwrap_or(k));
            let part_type = file.content_type.as_deref().unwrap_or(DEFAULT_PART_TYPE);
            out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            out.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
                     Content-Type: {part_type}\r\n\r\n"
                )
                .as_bytes(),
            );
            out.extend_from_slice(&file.bytes);
            out.extend_from_slice(b"\r\n");
        }
        if sent_files {
            continue;
        }
        out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        out.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
        );
        if matches!(v, Value::Object(_) | Value::Array(_)) {
            out.extend_from_slice(b"Content-Type: application/json\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(scalar(v).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (out, boundary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn path_styles() {
        let arr = json!(["a b", "c/d"]);
        let obj = json!({"role": "admin", "first": "Al"});
        assert_eq!(
            path_value("simple", false, "id", &json!("../x?y#z")),
            "..%2Fx%3Fy%23z"
        );
        assert_eq!(path_value("simple", false, "id", &arr), "a%20b,c%2Fd");
        assert_eq!(
            path_value("simple", true, "id", &obj),
            "role=admin,first=Al"
        );
        assert_eq!(
            path_value("simple", false, "id", &obj),
            "role,admin,first,Al"
        );
        assert_eq!(path_value("label", false, "id", &json!(5)), ".5");
        assert_eq!(path_value("label", true, "id", &arr), ".a%20b.c%2Fd");
        assert_eq!(path_value("matrix", false, "id", &json!(5)), ";id=5");
        assert_eq!(path_value("matrix", true, "id", &arr), ";id=a%20b;id=c%2Fd");
        assert_eq!(path_value("matrix", false, "id", &arr), ";id=a%20b,c%2Fd");
        assert_eq!(
            path_value("matrix", true, "id", &obj),
            ";role=admin;first=Al"
        );
    }

    #[test]
    fn query_styles() {
        let arr = json!(["x", "y&z"]);
        assert_eq!(query_pairs("form", true, "s", &arr), ["s=x", "s=y%26z"]);
        assert_eq!(query_pairs("form", false, "s", &arr), ["s=x,y%26z"]);
        assert_eq!(
            query_pairs("spaceDelimited", false, "s", &arr),
            ["s=x%20y%26z"]
        );
        assert_eq!(
            query_pairs("pipeDelimited", false, "s", &arr),
            ["s=x|y%26z"]
        );
        let obj = json!({"a": 1, "b": {"c": [true, null]}});
        assert_eq!(
            query_pairs("deepObject", true, "f", &obj),
            ["f[a]=1", "f[b][c][0]=true", "f[b][c][1]="]
        );
        assert_eq!(
            query_pairs("form", true, "f", &json!({"a": 1, "b": 2})),
            ["a=1", "b=2"]
        );
        assert_eq!(
            query_pairs("form", false, "f", &json!({"a": 1, "b": 2})),
            ["f=a,1,b,2"]
        );
        assert!(query_pairs("form", true, "f", &Value::Null).is_empty());
    }

    #[test]
    fn stripe_form_bodies() {
        let body = json!({
            "email": "a+b@example.com",
            "metadata": {"order id": "6735", "k[x]": "v"},
            "items": [{"price": "p_1", "quantity": 2}],
            "expand": ["customer"],
            "description": null,
        });
        let Value::Object(map) = body else {
            unreachable!()
        };
        assert_eq!(
            form_pairs(&map),
            [
                ("email".to_string(), "a+b@example.com".to_string()),
                ("metadata[order id]".into(), "6735".into()),
                ("metadata[k[x]]".into(), "v".into()),
                ("items[0][price]".into(), "p_1".into()),
                ("items[0][quantity]".into(), "2".into()),
                ("expand[0]".into(), "customer".into()),
                ("description".into(), "".into()),
            ]
        );
        assert!(
            form_body(&map).starts_with("email=a%2Bb%40example.com&metadata%5Border+id%5D=6735")
        );
    }
}
