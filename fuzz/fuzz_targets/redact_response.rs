//! `upstream::shown_body`, the function every upstream answer goes through before the agent
//! sees it (scrub the configured credentials from the raw bytes, cut to the response budget,
//! decode JSON or text, describe binary content), on generated bodies with credentials planted
//! in them. The credentials come from a real `UpstreamConfig` (`--upstream` with user info, a
//! `Bearer`/`Token`/bare credential header) and its `secrets()`; the body is cut exactly as
//! `read_limited` cuts it (the first `budget` bytes, `truncated` when there were more).
//!
//! Bodies: a JSON document (compact or pretty, optionally PHP-style with `\/`) whose strings
//! and keys hold credentials among generated text, plain text, or raw bytes (not UTF-8, NULs),
//! under a JSON, text, binary or missing content type. The credentials are planted whole, in
//! every form the target computes itself: as is, percent-encoded (every non-alphanumeric,
//! RFC 3986 component, form style; upper- and lower-case hex), JSON-escaped, and for the user
//! info as `user:password`, its base64 and `Basic base64`.
//!
//! Oracle (issue 15): no piece of 6 characters or more of any form appears in the result: its
//! JSON text, each decoded string and key, the decoded bytes of a binary body's `base64`. The
//! generated text never holds an ASCII capital letter (nor a backslash outside JSON), so only
//! pieces with one are checked: such a piece in the result can only come from a planted
//! credential. Also: a result of a cut body is bounded (at most 8 bytes of JSON per byte read,
//! plus a constant), and a cut binary body is never shown.

#![no_main]

use std::collections::HashSet;

use apigate::upstream::{UpstreamConfig, shown_body};
use arbitrary::{Result, Unstructured};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Number, Value};

const USER: &str = "apiuser";
/// What a token is made of: capitals (the oracle's markers), digits, URL-special characters.
const TOKEN_CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ0123456789-._~+/=";
/// What a password is made of: also characters that need escaping in a URL or JSON.
const PASSWORD_CHARS: &[char] = &[
    'A', 'B', 'C', 'D', 'K', 'Q', 'X', 'Z', '1', '7', '9', '@', ':', '/', '%', '+', ' ', '!', '&',
    '=', '?', '#', '"', '\\', '\'', 'é',
];
const SCHEMES: &[&str] = &["Bearer", "Token", ""];
const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/json; charset=utf-8",
    "application/problem+json",
    "text/plain",
    "text/html; charset=utf-8",
    "application/xml",
    "",
    "application/octet-stream",
    "image/png",
];
/// Text that is not planted: every byte the fuzzer likes, but no capital letter.
const FILLERS: &[&str] = &[
    "",
    " ",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\n",
    "\t",
    "é",
    "\u{1f600}",
    "\u{0}",
    "\u{1b}",
    "null",
    "1",
    "-0.5e3",
    "%",
    "%2",
    "%2f",
    "+",
    "=",
    "/",
    "bearer ",
    "basic ",
    "token=",
    "auth: ",
];
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

struct Case {
    header: String,
    upstream: String,
    /// Every form of every credential (at least 8 bytes, as `upstream` scrubs).
    forms: Vec<String>,
    body: Vec<u8>,
    content_type: &'static str,
    budget: usize,
}

fn chars(u: &mut Unstructured<'_>, min: usize, max: usize, from: &[char]) -> Result<String> {
    let n = u.int_in_range(min..=max)?;
    (0..n).map(|_| u.choose(from).copied()).collect()
}

fn lower_hex(encoded: &str) -> String {
    let mut out = String::new();
    let mut hex_left = 0;
    for c in encoded.chars() {
        if hex_left > 0 {
            out.push(c.to_ascii_lowercase());
            hex_left -= 1;
        } else {
            hex_left = if c == '%' { 2 } else { 0 };
            out.push(c);
        }
    }
    out
}

/// `secret` as an echo may show it.
fn encodings(secret: &str, out: &mut Vec<String>) {
    if secret.len() < 8 {
        return;
    }
    out.push(secret.to_string());
    for encoded in [
        utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string(),
        utf8_percent_encode(secret, COMPONENT).to_string(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
    ] {
        out.push(lower_hex(&encoded));
        out.push(encoded);
    }
    let quoted = serde_json::to_string(secret).expect("a string serializes");
    let escaped = &quoted[1..quoted.len() - 1];
    out.push(escaped.replace('/', "\\/"));
    out.push(escaped.to_string());
}

/// Generated text without capital letters (and without backslashes, which could spell one as
/// a JSON escape).
fn filler(u: &mut Unstructured<'_>) -> Result<String> {
    let s: String = if u.ratio(1, 3)? {
        (*u.choose(FILLERS)?).to_string()
    } else {
        u.arbitrary()?
    };
    Ok(s.chars()
        .filter(|&c| c != '\\')
        .map(|c| c.to_ascii_lowercase())
        .collect())
}

fn planted(u: &mut Unstructured<'_>, forms: &[String]) -> Result<String> {
    let form = u.choose(forms)?;
    Ok(match u.int_in_range(0..=2u8)? {
        0 => form.clone(),
        1 => format!("{}{form}", filler(u)?),
        _ => format!("{}{form}{}", filler(u)?, filler(u)?),
    })
}

fn json(u: &mut Unstructured<'_>, depth: usize, forms: &[String]) -> Result<Value> {
    let kinds = if depth == 0 { 4 } else { 6 };
    Ok(match u.int_in_range(0..=kinds)? {
        0 => Value::Null,
        1 => match u.int_in_range(0..=2u8)? {
            0 => Value::Bool(u.arbitrary()?),
            1 => Value::Number(Number::from(u.arbitrary::<i64>()?)),
            _ => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        },
        2 => Value::String(filler(u)?),
        3 | 4 => Value::String(planted(u, forms)?),
        5 => {
            let n = u.int_in_range(0..=5usize)?;
            Value::Array(
                (0..n)
                    .map(|_| json(u, depth - 1, forms))
                    .collect::<Result<_>>()?,
            )
        }
        _ => {
            let mut map = Map::new();
            for _ in 0..u.int_in_range(0..=5usize)? {
                let key = if u.ratio(1, 4)? {
                    planted(u, forms)?
                } else {
                    filler(u)?
                };
                map.insert(key, json(u, depth - 1, forms)?);
            }
            Value::Object(map)
        }
    })
}

fn case(u: &mut Unstructured<'_>) -> Result<Case> {
    let token_chars: Vec<char> = TOKEN_CHARS.iter().map(|&b| char::from(b)).collect();
    let token = chars(u, 8, 32, &token_chars)?;
    let scheme = *u.choose(SCHEMES)?;
    let value = if scheme.is_empty() {
        token.clone()
    } else {
        format!("{scheme} {token}")
    };
    let password = if u.arbitrary()? {
        Some(chars(u, 1, 24, PASSWORD_CHARS)?)
    } else {
        None
    };
    // The user info becomes `Authorization`: the other credential goes in `X-Api-Key` then.
    let name = if password.is_some() || u.arbitrary()? {
        "X-Api-Key"
    } else {
        "Authorization"
    };
    let mut secrets = vec![value.clone()];
    if !scheme.is_empty() {
        secrets.push(token);
    }
    let upstream = match &password {
        Some(p) => {
            let user_pass = format!("{USER}:{p}");
            let b64 = base64::engine::general_purpose::STANDARD.encode(&user_pass);
            secrets.extend([format!("Basic {b64}"), b64, user_pass, p.clone()]);
            let in_url = utf8_percent_encode(p, NON_ALPHANUMERIC);
            format!("http://{USER}:{in_url}@127.0.0.1:9/v1")
        }
        None => "http://127.0.0.1:9/v1".to_string(),
    };
    let mut forms = Vec::new();
    for s in &secrets {
        encodings(s, &mut forms);
    }
    let body = match u.int_in_range(0..=3u8)? {
        0 | 1 => {
            let doc = json(u, 3, &forms)?;
            let mut text = if u.arbitrary()? {
                serde_json::to_string_pretty(&doc)
            } else {
                serde_json::to_string(&doc)
            }
            .expect("a value serializes");
            if u.ratio(1, 4)? {
                text = text.replace('/', "\\/");
            }
            text.into_bytes()
        }
        2 => {
            let mut text = String::new();
            for _ in 0..u.int_in_range(0..=12usize)? {
                text.push_str(&if u.arbitrary()? {
                    planted(u, &forms)?
                } else {
                    filler(u)?
                });
            }
            text.into_bytes()
        }
        _ => {
            let mut bytes = Vec::new();
            for _ in 0..u.int_in_range(0..=12usize)? {
                if u.arbitrary()? {
                    bytes.extend_from_slice(planted(u, &forms)?.as_bytes());
                } else {
                    let raw: Vec<u8> = u.arbitrary()?;
                    bytes.extend(
                        raw.into_iter()
                            .filter(|&b| b != b'\\')
                            .map(|b| b.to_ascii_lowercase()),
                    );
                }
            }
            bytes
        }
    };
    let content_type = *u.choose(CONTENT_TYPES)?;
    let budget = u.int_in_range(0..=body.len() + 16)?;
    Ok(Case {
        header: format!("{name}: {value}"),
        upstream,
        forms,
        body,
        content_type,
        budget,
    })
}

/// Every string and key of `v`, decoded.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k);
                strings(v, out);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(case) = case(&mut u) else {
        return;
    };
    let cfg = UpstreamConfig::from_flags(
        Some(&case.upstream),
        std::slice::from_ref(&case.header),
        None,
    )
    .expect("the generated configuration is valid");
    let secrets = cfg.secrets().expect("the secrets build");
    // As `read_limited` reads it.
    let truncated = case.body.len() > case.budget;
    let read = &case.body[..case.body.len().min(case.budget)];
    let ct = (!case.content_type.is_empty()).then_some(case.content_type);
    let shown = shown_body(read, truncated, ct, case.budget, &secrets);

    // Binary content: `{contentType, bytes, base64?}` (generated keys have no capital letter).
    let mut checked = shown.clone();
    let mut raw: Option<Vec<u8>> = None;
    if let Value::Object(map) = &mut checked
        && map.contains_key("contentType")
        && map.contains_key("bytes")
    {
        assert_eq!(map["bytes"], Value::from(read.len()), "{shown}");
        if let Some(b64) = map.remove("base64") {
            assert!(!truncated, "a cut binary body was shown: {shown}");
            let text = b64.as_str().expect("base64 is a string");
            assert!(text.len() <= case.budget, "base64 over the budget: {shown}");
            raw = Some(
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .expect("valid base64"),
            );
        }
    }
    let text = checked.to_string();
    if truncated {
        assert!(
            text.len() <= 8 * read.len() + 256,
            "{} bytes of JSON for {} bytes read",
            text.len(),
            read.len()
        );
    }

    let pieces: HashSet<&[u8]> = case
        .forms
        .iter()
        .flat_map(|f| f.as_bytes().windows(6))
        .filter(|w| w.iter().any(u8::is_ascii_uppercase))
        .collect();
    let mut haystacks: Vec<&[u8]> = vec![text.as_bytes()];
    let mut decoded = Vec::new();
    strings(&checked, &mut decoded);
    haystacks.extend(decoded.iter().map(|s| s.as_bytes()));
    if let Some(raw) = &raw {
        haystacks.push(raw);
    }
    for hay in haystacks {
        if let Some(w) = hay.windows(6).find(|w| pieces.contains(w)) {
            panic!(
                "{:?} of a credential reached the agent (budget {}, truncated {truncated}, {:?}): {shown}",
                String::from_utf8_lossy(w),
                case.budget,
                case.content_type
            );
        }
    }
});
