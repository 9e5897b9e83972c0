//! What of a tool call may leave apigate for a monitor: [`sanitize_args`] (the `args` of
//! `tool.pre_execute`: strings cut, other values by type name, credential-like keys redacted,
//! the session token dropped) and [`preview`] (the request an `api_execute` will send, with
//! credentials redacted), plus the text scrubbing both use. Pure functions; no I/O.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::types::Tool;

/// The longest a string argument may be once sanitized (the protocol's "first 100 chars").
pub const MAX_ARG_CHARS: usize = 100;
/// Limits that keep a sanitized `args` object small whatever the agent sent.
const MAX_ARG_KEYS: usize = 32;
pub(crate) const MAX_FULL_FIELD_CHARS: usize = 2048;

/// The operation a call resolved to; sent in full (method, path template, operationId).
#[derive(Debug, Clone, Copy)]
pub struct OperationRef<'a> {
    pub operation_id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
}

/// The `args` object sent to the monitor, per the protocol: strings cut to 100 characters,
/// every other value shown by its type name, secret-looking keys redacted and the session
/// token dropped. For `api_execute` (and `api_schema`) the method, path and operationId are
/// given in full — from `operation` when known — and `dryRun` as its boolean, so that a
/// monitor can decide on them. Header values, bodies and nested objects never appear.
pub fn sanitize_args(tool: Tool, args: &Value, operation: Option<&OperationRef>) -> Value {
    let mut out = Map::new();
    let Value::Object(obj) = args else {
        return Value::Object(out);
    };
    let full_operation = matches!(tool, Tool::Execute | Tool::Schema);
    for (key, value) in obj.iter().take(MAX_ARG_KEYS) {
        if key == "_sessionToken" {
            continue;
        }
        let key_out = cut(key, MAX_ARG_CHARS);
        if is_secret_key(key) {
            out.insert(key_out, "[redacted]".into());
            continue;
        }
        let sanitized = match (full_operation, key.as_str(), value) {
            (true, "method" | "path" | "operationId", Value::String(s)) => {
                cut(&redact_secrets_in_text(s), MAX_FULL_FIELD_CHARS).into()
            }
            (true, "dryRun", Value::Bool(b)) if tool == Tool::Execute => Value::Bool(*b),
            (_, _, Value::String(s)) => cut(&redact_secrets_in_text(s), MAX_ARG_CHARS).into(),
            (_, _, other) => type_name(other).into(),
        };
        out.insert(key_out, sanitized);
    }
    if full_operation {
        if let Some(op) = operation {
            out.insert("operationId".into(), op.operation_id.into());
            out.insert("method".into(), op.method.to_ascii_uppercase().into());
            out.insert("path".into(), op.path.into());
        } else if let Some(Value::String(m)) = out.get_mut("method") {
            *m = m.to_ascii_uppercase();
        }
    }
    Value::Object(out)
}

/// Does this key name look like it holds a credential?
fn is_secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    const NEEDLES: [&str; 11] = [
        "token",
        "secret",
        "passw",
        "authorization",
        "apikey",
        "cookie",
        "session",
        "credential",
        "privatekey",
        "accesskey",
        "signature",
    ];
    NEEDLES.iter().any(|n| k.contains(n))
}

/// The most bytes of a request body a preview shows.
const PREVIEW_BODY_BYTES: usize = 4096;

/// A request's dry-run view (`{method, url, headers, body, contentType}`) as a monitor may see
/// it: the method and the URL's path as they are (they say which resource the call touches);
/// query values, header values and body fields under credential-like names redacted;
/// credential-shaped text redacted anywhere; the body cut at 4 KB.
pub fn preview(view: &Value) -> Value {
    let mut out = Map::new();
    if let Some(m) = view.get("method").and_then(Value::as_str) {
        out.insert("method".into(), m.into());
    }
    if let Some(url) = view.get("url").and_then(Value::as_str) {
        out.insert("url".into(), preview_url(url).into());
    }
    if let Some(Value::Object(headers)) = view.get("headers") {
        let shown: Map<String, Value> = headers
            .iter()
            .map(|(k, v)| {
                let v = match v.as_str() {
                    _ if is_secret_key(k) => "[redacted]".to_string(),
                    Some(s) => redact_secrets_in_text(s),
                    None => type_name(v).to_string(),
                };
                (k.clone(), Value::String(v))
            })
            .collect();
        out.insert("headers".into(), Value::Object(shown));
    }
    if let Some(ct) = view.get("contentType").and_then(Value::as_str) {
        out.insert("contentType".into(), ct.into());
    }
    if let Some(body) = view.get("body") {
        let mut body = body.clone();
        redact_fields(&mut body);
        let text = match &body {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if text.len() > PREVIEW_BODY_BYTES {
            let cut = text.floor_char_boundary(PREVIEW_BODY_BYTES);
            body = Value::String(format!("{}… ({} bytes in all)", &text[..cut], text.len()));
        }
        out.insert("body".into(), body);
    }
    Value::Object(out)
}

/// The URL with the values of credential-like query parameters redacted.
fn preview_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return redact_secrets_in_text(url);
    };
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_secret_key(&k) {
                    "[redacted]".to_string()
                } else {
                    redact_secrets_in_text(&v)
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// Redacts, in place, the values under credential-like keys and credential-shaped text.
fn redact_fields(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if is_secret_key(k) {
                    *child = Value::String("[redacted]".into());
                } else {
                    redact_fields(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_fields),
        Value::String(s) => *s = redact_secrets_in_text(s),
        _ => {}
    }
}

/// Replaces things shaped like apigate tokens, bearer credentials or key=value secrets. The
/// key=value pattern has no leading `\b`: `_` is a word character, so `\btoken` would miss
/// `access_token=…` and `client_secret: …`, the most common spellings.
pub(crate) fn redact_secrets_in_text(s: &str) -> String {
    static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
        [
            r"sess_[0-9A-Za-z]{16,}",
            r"agk_[0-9A-Za-z]+_[0-9A-Za-z]+",
            r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+",
            r"(?i)(token|secret|password|passwd|api[_-]?key|apikey)\s*[=:]\s*\S+",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    });
    let mut out = s.to_owned();
    for re in PATTERNS.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, "[redacted]").into_owned();
        }
    }
    out
}

/// JSON type names as the protocol shows them.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The first `max` characters of `s` (never splits a character).
pub(crate) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_preview_shows_the_request_but_no_credential() {
        let view = json!({
            "method": "POST",
            "url": "https://api.example.com/v2/pet/42?expand=owner&api_key=k-123456&token=t-9",
            "headers": {"authorization": "[redacted]", "X-Api-Key": "given-key", "X-Trace": "abc",
                "X-Note": "Bearer sk_live_abcdef"},
            "contentType": "application/json",
            "body": {"name": "Rex", "password": "hunter2", "owner": {"client_secret": "s3"},
                "note": "token=abc123"}
        });
        let p = preview(&view);
        let text = p.to_string();
        for secret in [
            "k-123456",
            "t-9",
            "given-key",
            "sk_live_abcdef",
            "hunter2",
            "s3\"",
            "abc123",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(p["method"], "POST");
        let url = p["url"].as_str().unwrap();
        assert!(
            url.starts_with("https://api.example.com/v2/pet/42?expand=owner&"),
            "{url}"
        );
        assert_eq!(p["headers"]["X-Trace"], "abc");
        assert_eq!(p["body"]["name"], "Rex");
        let big =
            json!({"method": "POST", "url": "https://a.example/x", "body": "x".repeat(10_000)});
        let cut = preview(&big)["body"].as_str().unwrap().to_string();
        assert!(
            cut.len() < 4200 && cut.ends_with("(10000 bytes in all)"),
            "{}",
            cut.len()
        );
    }

    #[test]
    fn strings_are_cut_and_other_values_typed() {
        let long = "x".repeat(300);
        let args = json!({"query": long, "limit": 5, "tag": "pets", "method": "get", "extra": [1]});
        let out = sanitize_args(Tool::Discover, &args, None);
        assert_eq!(out["query"].as_str().unwrap().chars().count(), 100);
        assert_eq!(out["limit"], "number");
        assert_eq!(out["tag"], "pets");
        assert_eq!(out["method"], "get");
        assert_eq!(out["extra"], "array");
    }

    #[test]
    fn cutting_respects_characters() {
        let s = "é".repeat(150);
        assert_eq!(cut(&s, 100).chars().count(), 100);
    }

    #[test]
    fn execute_shows_operation_in_full_and_hides_the_rest() {
        let long_path = format!("/{}", "a".repeat(150));
        let args = json!({
            "operationId": "deletePet",
            "pathParams": {"petId": 1},
            "headers": {"Authorization": "Bearer abc", "X-Trace": "t"},
            "body": {"password": "hunter2"},
            "query": {"token": "t0k"},
            "dryRun": true,
            "_sessionToken": "sess_0123456789abcdef0123456789abcdef",
        });
        let op = OperationRef {
            operation_id: "deletePet",
            method: "delete",
            path: &long_path,
        };
        let out = sanitize_args(Tool::Execute, &args, Some(&op));
        assert_eq!(out["method"], "DELETE");
        assert_eq!(out["path"], long_path.as_str());
        assert_eq!(out["operationId"], "deletePet");
        assert_eq!(out["headers"], "object");
        assert_eq!(out["body"], "object");
        assert_eq!(out["pathParams"], "object");
        assert_eq!(out["dryRun"], true);
        assert!(out.get("_sessionToken").is_none());
        let text = out.to_string();
        for secret in ["Bearer", "abc", "hunter2", "t0k", "sess_"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn secret_keys_and_token_shaped_strings_are_redacted() {
        let args = json!({
            "apiKey": "k",
            "x-session-id": "s",
            "query": "find sess_0123456789abcdef0123456789abcdef and Bearer xyz.abc",
            "note": "password=hunter2 ok",
        });
        let out = sanitize_args(Tool::Discover, &args, None);
        assert_eq!(out["apiKey"], "[redacted]");
        assert_eq!(out["x-session-id"], "[redacted]");
        let text = out.to_string();
        assert!(!text.contains("sess_0123"), "{text}");
        assert!(!text.contains("xyz.abc"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn non_object_args_give_an_empty_object() {
        assert_eq!(sanitize_args(Tool::Discover, &json!("x"), None), json!({}));
    }
}
