//! The upstream's answer as `api_execute` returns it: the body read incrementally up to a
//! budget (never buffered whole), cut at a valid JSON boundary when too long, and a safe
//! allow-list of response headers (never `Set-Cookie`).

use serde::Serialize;
use serde_json::{Map, Value, json};
use url::Url;

/// `api_execute`'s result: `{status, ok, headers, body, truncated, durationMs}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamResponse {
    pub status: u16,
    /// `true` for 2xx.
    pub ok: bool,
    /// The allow-listed response headers, lower-case names; repeated headers joined by `, `.
    pub headers: Map<String, Value>,
    /// Parsed JSON when the response is JSON; text otherwise; `null` when empty.
    pub body: Value,
    /// The body was longer than the budget and was cut.
    pub truncated: bool,
    pub duration_ms: u64,
}

/// Response headers an agent may see. Everything else (cookies, internal routing headers,
/// server software banners) is dropped.
fn is_safe_header(name: &str) -> bool {
    matches!(
        name,
        "content-type"
            | "content-length"
            | "content-language"
            | "content-range"
            | "accept-ranges"
            | "allow"
            | "etag"
            | "last-modified"
            | "cache-control"
            | "expires"
            | "link"
            | "retry-after"
            | "www-authenticate"
            | "warning"
            | "deprecation"
            | "sunset"
            | "x-request-id"
            | "request-id"
            | "x-github-request-id"
            | "idempotency-key"
            | "x-total-count"
    ) || [
        "x-ratelimit-",
        "ratelimit",
        "x-rate-limit-",
        "x-pagination-",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The allow-listed headers of a response from `url`; `Location` only when it stays on the
/// same origin.
pub(crate) fn safe_headers(headers: &http::HeaderMap, url: &Url) -> Map<String, Value> {
    let mut out = Map::new();
    for name in headers.keys() {
        let key = name.as_str();
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if values.is_empty() {
            continue;
        }
        let keep = if key == "location" {
            url.join(values[0])
                .is_ok_and(|to| to.origin() == url.origin())
        } else {
            is_safe_header(key)
        };
        if keep {
            out.insert(key.to_string(), Value::String(values.join(", ")));
        }
    }
    out
}

/// Reads the body chunk by chunk and stops after `max` bytes. Returns the bytes and whether
/// more was left unread.
pub(crate) async fn read_limited(
    resp: &mut reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let hint = resp
        .content_length()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(8 * 1024);
    // A `Content-Length` is a hint from the upstream, not a promise: never preallocate more
    // than the budget or 1 MiB.
    let mut buf = Vec::with_capacity(hint.min(max).min(1 << 20));
    while let Some(chunk) = resp.chunk().await? {
        let room = max - buf.len();
        if chunk.len() > room {
            buf.extend_from_slice(&chunk[..room]);
            return Ok((buf, true));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok((buf, false))
}

/// The body as a JSON value: parsed JSON, JSON cut to a valid prefix when `truncated`, text
/// (cut on a character boundary), or a placeholder for binary content.
/// Binary bodies up to this size come back base64-encoded; larger ones as type and size.
const MAX_BASE64_BYTES: usize = 16 * 1024;

pub(crate) fn body_value(
    bytes: &[u8],
    truncated: bool,
    content_type: Option<&str>,
    secrets: &[String],
) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    let ct = content_type.unwrap_or_default().to_ascii_lowercase();
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    let looks_json = ct.contains("json") || (ct.is_empty() && matches!(first, Some(b'{' | b'[')));
    if looks_json {
        let parsed = if truncated {
            cut_json(bytes, bytes.len())
        } else {
            serde_json::from_slice(bytes).ok()
        };
        if let Some(v) = parsed {
            return v;
        }
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Value::String(s.to_string()),
        // Cut in the middle of a character: drop the partial character.
        Err(e) if e.error_len().is_none() => {
            Value::String(String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned())
        }
        Err(_) if ct.starts_with("text/") || ct.contains("xml") || ct.contains("json") => {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        Err(_) => binary(bytes, truncated, &ct, secrets),
    }
}

/// A binary body as `{contentType, bytes, base64?}`: small, complete bodies in base64, unless
/// they hold a configured credential (its base64 form would pass every text redaction).
fn binary(bytes: &[u8], truncated: bool, ct: &str, secrets: &[String]) -> Value {
    use base64::Engine as _;
    let mut out = json!({
        "contentType": if ct.is_empty() { "application/octet-stream" } else { ct },
        "bytes": bytes.len(),
    });
    let holds_secret = secrets
        .iter()
        .any(|s| !s.is_empty() && bytes.windows(s.len()).any(|w| w == s.as_bytes()));
    if truncated {
        out["note"] = Value::String(format!(
            "binary content, more than {} bytes: larger than the response budget; not shown",
            bytes.len()
        ));
    } else if holds_secret {
        out["note"] =
            Value::String("binary content holding a configured credential; not shown".into());
    } else if bytes.len() > MAX_BASE64_BYTES {
        out["note"] = Value::String(format!(
            "binary content larger than {MAX_BASE64_BYTES} bytes; not shown"
        ));
    } else {
        out["base64"] = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    out
}

/// Replaces every occurrence of a configured secret in the strings (and keys) of `v` with
/// `[redacted]`: an upstream that echoes the request (or quotes a bad token in its error)
/// must not hand the credential to the agent.
pub(crate) fn redact(v: &mut Value, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let clean = |s: &str| {
        let mut s = s.to_string();
        for secret in secrets {
            if s.contains(secret.as_str()) {
                s = s.replace(secret.as_str(), "[redacted]");
            }
        }
        s
    };
    match v {
        Value::String(s) if secrets.iter().any(|x| s.contains(x.as_str())) => *s = clean(s),
        Value::Array(items) => items.iter_mut().for_each(|i| redact(i, secrets)),
        Value::Object(map) => {
            if map
                .keys()
                .any(|k| secrets.iter().any(|x| k.contains(x.as_str())))
            {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, v)| (clean(&k), v))
                    .collect();
            }
            map.values_mut().for_each(|c| redact(c, secrets));
        }
        _ => {}
    }
}

#[derive(Clone, Copy)]
enum Frame {
    Array,
    /// `true` while the next string in this object is a key.
    Object(bool),
}

fn closers(stack: &[Frame], in_string: bool) -> Vec<u8> {
    let mut c = Vec::with_capacity(stack.len() + 1);
    if in_string {
        c.push(b'"');
    }
    c.extend(stack.iter().rev().map(|f| match f {
        Frame::Array => b']',
        Frame::Object(_) => b'}',
    }));
    c
}

/// The longest valid JSON that is a prefix of `bytes` (a cut-off JSON document) plus closing
/// brackets, at most `limit` bytes long: arrays keep their first whole items, objects their
/// first whole members, a string value being written is cut. `None` if no such prefix exists
/// (for example a cut-off top-level number).
pub(crate) fn cut_json(bytes: &[u8], limit: usize) -> Option<Value> {
    // Best cut at a structural boundary, and best cut inside a string value.
    let mut structural: Option<(usize, Vec<u8>)> = None;
    let mut in_string: Option<(usize, Vec<u8>)> = None;
    let mut stack: Vec<Frame> = Vec::new();
    let fits = |pos: usize, close: usize| pos + close <= limit;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                let is_key = matches!(stack.last(), Some(Frame::Object(true)));
                let depth = stack.len();
                // Scan the string; remember the last safe place to cut inside a value string.
                let mut j = i + 1;
                let mut last_safe = None;
                let mut closed = false;
                while j < bytes.len() {
                    if !is_key && (bytes[j] & 0xC0) != 0x80 && fits(j, depth + 1) {
                        last_safe = Some(j);
                    }
                    match bytes[j] {
                        b'\\' => {
                            let skip = if bytes.get(j + 1) == Some(&b'u') {
                                6
                            } else {
                                2
                            };
                            j += skip;
                        }
                        b'"' => {
                            closed = true;
                            break;
                        }
                        _ => j += 1,
                    }
                }
                if !closed {
                    if let Some(p) = last_safe {
                        in_string = Some((p, closers(&stack, true)));
                    }
                    break;
                }
                i = j + 1;
                if is_key {
                    continue;
                }
                if let Some(p) = last_safe {
                    in_string = Some((p, closers(&stack, true)));
                }
                let close = closers(&stack, false);
                if fits(i, close.len()) {
                    structural = Some((i, close));
                }
                continue;
            }
            b'{' | b'[' => {
                stack.push(if b == b'{' {
                    Frame::Object(true)
                } else {
                    Frame::Array
                });
                // Only the outermost container may be cut to empty; a nested one that does
                // not fit at all is left out rather than shown as an empty `{}`.
                let close = closers(&stack, false);
                if stack.len() == 1 && fits(i + 1, close.len()) {
                    structural = Some((i + 1, close));
                }
            }
            b'}' | b']' => {
                stack.pop();
                let close = closers(&stack, false);
                if fits(i + 1, close.len()) {
                    structural = Some((i + 1, close));
                }
            }
            b',' => {
                if let Some(Frame::Object(expect_key)) = stack.last_mut() {
                    *expect_key = true;
                }
            }
            b':' => {
                if let Some(Frame::Object(expect_key)) = stack.last_mut() {
                    *expect_key = false;
                }
            }
            b if b.is_ascii_whitespace() => {}
            _ => {
                // A number or literal: complete only once a delimiter follows it.
                let mut j = i;
                while j < bytes.len()
                    && !matches!(bytes[j], b',' | b']' | b'}' | b':')
                    && !bytes[j].is_ascii_whitespace()
                {
                    j += 1;
                }
                if j == bytes.len() {
                    break;
                }
                let close = closers(&stack, false);
                if fits(j, close.len()) {
                    structural = Some((j, close));
                }
                i = j;
                continue;
            }
        }
        i += 1;
    }
    let attempt = |(pos, close): &(usize, Vec<u8>)| {
        let mut out = bytes[..*pos].to_vec();
        out.extend_from_slice(close);
        serde_json::from_slice::<Value>(&out).ok()
    };
    let better_in_string = match (&in_string, &structural) {
        (Some((a, _)), Some((b, _))) => a > b,
        (Some(_), None) => true,
        _ => false,
    };
    if better_in_string && let Some(v) = in_string.as_ref().and_then(attempt) {
        return Some(v);
    }
    structural.as_ref().and_then(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(s: &str, limit: usize) -> Option<Value> {
        let v = cut_json(&s.as_bytes()[..limit.min(s.len())], limit)?;
        assert!(v.to_string().len() <= limit, "{v} longer than {limit}");
        Some(v)
    }

    #[test]
    fn arrays_keep_whole_items() {
        let s = r#"[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"}]"#;
        assert_eq!(
            cut(s, 50).unwrap(),
            json!([{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3}])
        );
        assert_eq!(cut(s, 24).unwrap(), json!([{"id":1,"name":"a"}]));
        assert_eq!(cut(s, 3).unwrap(), json!([]));
        assert_eq!(cut(s, 1), None);
    }

    #[test]
    fn strings_are_cut_on_char_boundaries() {
        let s = r#"{"text":"héllo wörld","n":1}"#;
        for limit in 9..s.len() {
            let v = cut(s, limit).unwrap();
            assert!(v.is_object(), "{limit}: {v}");
        }
        assert_eq!(cut(r#""abcdef""#, 5).unwrap(), json!("abc"));
        // Never inside an escape.
        let v = cut(r#"["a\"b\u00e9c"]"#, 12).unwrap();
        assert!(v.is_array());
        // Keys are never cut.
        assert_eq!(cut(r#"{"abcdef":1}"#, 6).unwrap(), json!({}));
    }

    #[test]
    fn envelopes_and_pretty_printing() {
        let items: Vec<Value> = (0..100)
            .map(|i| json!({"id": i, "tags": ["a", "b"]}))
            .collect();
        let doc = json!({"total": 100, "data": items, "next": "x"});
        let pretty = serde_json::to_string_pretty(&doc).unwrap();
        let v = cut(&pretty, 600).unwrap();
        assert_eq!(v["total"], 100);
        let data = v["data"].as_array().unwrap();
        assert!(!data.is_empty() && data.len() < 100);
        assert_eq!(data[0], json!({"id": 0, "tags": ["a", "b"]}));
        // One huge string inside an envelope is cut, not dropped.
        let doc = json!({"id": 1, "content": "x".repeat(10_000)});
        let v = cut(&doc.to_string(), 1000).unwrap();
        assert_eq!(v["id"], 1);
        assert!(v["content"].as_str().unwrap().len() > 900);
    }

    #[test]
    fn numbers_need_a_delimiter() {
        assert_eq!(cut("[1, 23, 456]", 10).unwrap(), json!([1, 23]));
        assert_eq!(cut("12345", 3), None);
    }

    #[test]
    fn text_and_binary_bodies() {
        assert_eq!(body_value(b"", false, None, &[]), Value::Null);
        assert_eq!(
            body_value(b"{\"a\":1}", false, Some("application/json"), &[]),
            json!({"a":1})
        );
        assert_eq!(
            body_value(b"not json", false, Some("application/json"), &[]),
            json!("not json")
        );
        let s = "ab\u{e9}".as_bytes();
        assert_eq!(
            body_value(&s[..3], true, Some("text/plain"), &[]),
            json!("ab")
        );
        let v = body_value(&[0xff, 0x00, 0xfe], false, Some("image/png"), &[]);
        assert_eq!(
            v,
            json!({"contentType": "image/png", "bytes": 3, "base64": "/wD+"})
        );
        let mut with_secret = vec![0xff, 0x00];
        with_secret.extend_from_slice(b"sk_live_abcdef");
        let v = body_value(
            &with_secret,
            false,
            Some("application/octet-stream"),
            &["sk_live_abcdef".into()],
        );
        assert!(
            v.get("base64").is_none() && v["note"].as_str().unwrap().contains("credential"),
            "{v}"
        );
        let big = vec![0xffu8; 20_000];
        let v = body_value(&big, false, None, &[]);
        assert_eq!(v["bytes"], 20_000);
        assert!(v.get("base64").is_none());
        let v = body_value(&big, true, None, &[]);
        assert!(v["note"].as_str().unwrap().contains("budget"), "{v}");
    }

    #[test]
    fn echoed_secrets_are_redacted() {
        let secrets = vec!["Bearer sk_test_123".to_string(), "sk_test_123".to_string()];
        let mut v = json!({"headers": {"Authorization": "Bearer sk_test_123"},
            "msg": ["bad key sk_test_123!"], "sk_test_123": 1, "n": 5});
        redact(&mut v, &secrets);
        assert_eq!(
            v,
            json!({"headers": {"Authorization": "[redacted]"},
            "msg": ["bad key [redacted]!"], "[redacted]": 1, "n": 5})
        );
    }

    #[test]
    fn only_safe_headers_pass() {
        let mut h = http::HeaderMap::new();
        h.insert("set-cookie", "s=1".parse().unwrap());
        h.insert("server", "nginx".parse().unwrap());
        h.insert("x-ratelimit-remaining", "9".parse().unwrap());
        h.append("link", "<a>".parse().unwrap());
        h.append("link", "<b>".parse().unwrap());
        h.insert("location", "https://evil.example/x".parse().unwrap());
        let url = Url::parse("https://api.example/v1/x").unwrap();
        let out = safe_headers(&h, &url);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out["link"], "<a>, <b>");
        h.insert("location", "/v1/y".parse().unwrap());
        assert!(safe_headers(&h, &url).contains_key("location"));
    }
}
