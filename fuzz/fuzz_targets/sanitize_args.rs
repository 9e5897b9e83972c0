//! The monitor-event sanitizer (`monitor::sanitize_args`) on generated tool arguments, with a
//! generated session token, server key and bearer credential planted where agents put them:
//! `_sessionToken`, header values, bodies, secret-named keys, inside free text.
//!
//! Properties, from the module docs and the protocol: the output is a flat object of at most
//! 32 argument keys (plus the operation's three fields), no key longer than 100 characters,
//! no string value longer than 100 characters (2,048 for `method`/`path`/`operationId` of
//! `api_execute`/`api_schema`), no nested values; `_sessionToken` never appears; values under
//! secret-looking keys are `[redacted]`; none of the planted secrets appears anywhere in the
//! output; an operation given by the caller is shown exactly.

#![no_main]

use apigate::monitor::{MAX_ARG_CHARS, OperationRef, sanitize_args};
use apigate::tools::Tool;
use apigate_fuzz::{string, value};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const TOOLS: &[Tool] = &Tool::ALL;
const KEYS: &[&str] = &[
    "operationId",
    "method",
    "path",
    "pathParams",
    "query",
    "headers",
    "body",
    "dryRun",
    "_sessionToken",
    "apiKey",
    "x-api-key",
    "password",
    "Authorization",
    "client_secret",
    "sessionId",
    "note",
    "limit",
    "tag",
];
const MAX_KEYS: usize = 32;
const MAX_FULL_FIELD_CHARS: usize = 2048;

struct Case {
    tool: Tool,
    args: Value,
    op: Option<(String, String, String)>,
    secrets: Vec<String>,
}

fn alnum(u: &mut Unstructured<'_>, len: usize, alphabet: &[u8]) -> Result<String> {
    (0..len)
        .map(|_| u.choose(alphabet).map(|&b| char::from(b)))
        .collect()
}

fn case(u: &mut Unstructured<'_>) -> Result<Case> {
    const HEX: &[u8] = b"0123456789abcdef";
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let session = format!("sess_{}", alnum(u, 32, HEX)?);
    let key_secret = alnum(u, 40, ALNUM)?;
    let key = format!("agk_{}_{key_secret}", alnum(u, 8, &ALNUM[26..])?);
    let bearer = alnum(u, 24, ALNUM)?;
    // The parts that must never leak (a prefix alone is not the secret).
    let secrets = vec![session[5..].to_string(), key_secret.clone(), bearer.clone()];
    let planted = |u: &mut Unstructured<'_>| -> Result<String> {
        Ok(match u.int_in_range(0..=8u8)? {
            0 => session.clone(),
            1 => key.clone(),
            2 => format!("Bearer {bearer}"),
            3 => format!("{} {} {}", string(u)?, session, string(u)?),
            4 => format!("{}{}{}", string(u)?, key, string(u)?),
            5 => format!("{} Authorization: Bearer {bearer}", string(u)?),
            6 => format!("token={bearer}"),
            7 => format!("https://api.example.com/callback?state=1&access_token={bearer}"),
            _ => format!("{} client_secret: {bearer}", string(u)?),
        })
    };
    let tool = *u.choose(TOOLS)?;
    let mut args = Map::new();
    for _ in 0..u.int_in_range(0..=40usize)? {
        let k = if u.arbitrary()? {
            (*u.choose(KEYS)?).to_string()
        } else {
            string(u)?
        };
        let v = match u.int_in_range(0..=3u8)? {
            0 => Value::String(planted(u)?),
            1 => serde_json::json!({ "Authorization": planted(u)?, "x": value(u, 1)? }),
            _ => value(u, 2)?,
        };
        args.insert(k, v);
    }
    if u.arbitrary()? {
        args.insert("_sessionToken".into(), Value::String(session.clone()));
    }
    let op = if u.arbitrary()? {
        Some((string(u)?, string(u)?, string(u)?))
    } else {
        None
    };
    let args = if u.ratio(1, 16)? {
        value(u, 2)?
    } else {
        Value::Object(args)
    };
    Ok(Case {
        tool,
        args,
        op,
        secrets,
    })
}

fn is_secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    [
        "token",
        "secret",
        "passw",
        "authorization",
        "apikey",
        "cookie",
        "session",
    ]
    .iter()
    .any(|n| k.contains(n))
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(Case {
        tool,
        args,
        op,
        secrets,
    }) = case(&mut u)
    else {
        return;
    };
    let op_ref = op.as_ref().map(|(id, method, path)| OperationRef {
        operation_id: id,
        method,
        path,
    });
    let out = sanitize_args(tool, &args, op_ref.as_ref());
    let obj = out.as_object().expect("the sanitized args are an object");
    let full = matches!(tool, Tool::Execute | Tool::Schema);
    assert!(obj.len() <= MAX_KEYS + 3, "{} keys", obj.len());
    assert!(!obj.contains_key("_sessionToken"));
    for (k, v) in obj {
        assert!(
            k.chars().count() <= MAX_ARG_CHARS,
            "key of {} chars",
            k.chars().count()
        );
        let limit = if full && matches!(k.as_str(), "method" | "path" | "operationId") {
            if op_ref.is_some() {
                continue;
            }
            MAX_FULL_FIELD_CHARS
        } else {
            MAX_ARG_CHARS
        };
        match v {
            Value::String(s) => {
                assert!(
                    s.chars().count() <= limit,
                    "{k}: {} chars",
                    s.chars().count()
                )
            }
            Value::Bool(_) => assert!(k == "dryRun" && tool == Tool::Execute, "{k}: {v}"),
            other => panic!("{k}: a nested or non-string value {other}"),
        }
    }
    if let Value::Object(input) = &args {
        let shown = |k: &str| -> String { k.chars().take(MAX_ARG_CHARS).collect() };
        let kept: Vec<&String> = input
            .keys()
            .take(MAX_KEYS)
            .filter(|k| *k != "_sessionToken")
            .collect();
        for k in &kept {
            // Two long keys may share their first 100 characters: the later one is shown.
            let alone = kept.iter().filter(|o| shown(o) == shown(k)).count() == 1;
            if alone && is_secret_key(k) {
                assert_eq!(obj.get(&shown(k)), Some(&Value::from("[redacted]")), "{k}");
            }
        }
    }
    // Arguments that are not an object give `{}` (the tools never send those).
    if let (Some(op), true) = (&op_ref, args.is_object()) {
        if full {
            assert_eq!(obj.get("operationId"), Some(&Value::from(op.operation_id)));
            assert_eq!(obj.get("path"), Some(&Value::from(op.path)));
            assert_eq!(
                obj.get("method"),
                Some(&Value::from(op.method.to_ascii_uppercase()))
            );
        }
    }
    let text = out.to_string();
    // The operation comes from the spec, not the agent: it is shown as given.
    let op_text = op
        .as_ref()
        .filter(|_| full)
        .map(|(a, b, c)| format!("{a}{b}{c}"))
        .unwrap_or_default();
    for s in &secrets {
        if op_text.contains(s.as_str()) {
            continue;
        }
        assert!(!text.contains(s.as_str()), "secret {s:?} leaked: {text}");
    }
});
