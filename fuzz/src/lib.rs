//! Input generators shared by the fuzz targets: JSON values and strings drawn from the fuzzer's
//! bytes, biased towards the characters and shapes that break URL building, path matching and
//! secret redaction (dot segments, encoded slashes, user info, tokens, control characters).

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Number, Value};

/// Strings worth trying in every position; the rest of the time the fuzzer's own bytes.
pub const TRICKY: &[&str] = &[
    "",
    " ",
    ".",
    "..",
    "...",
    "/",
    "\\",
    "../admin",
    "..\\admin",
    "%2e%2e",
    "%2E%2E",
    "%2e",
    ".%2e",
    "%2f",
    "%252e%252e",
    "?",
    "#",
    "&",
    "=",
    ";",
    ",",
    "[",
    "]",
    "{",
    "}",
    ":",
    "@",
    "~",
    "|",
    "%",
    "%zz",
    "@evil.example",
    "//evil.example",
    "http://evil.example/",
    "evil.example:80",
    "\r\nX-Injected: 1",
    "\0",
    "\u{7f}",
    "é",
    "\u{feff}",
    "\u{202e}",
    "sess_0123456789abcdef0123456789abcdef",
    "agk_abcdefgh_0123456789ABCDEFGHIJabcdefghij0123456789",
    "Bearer abc.def-ghi",
    "token=hunter2",
    "42",
    "-1",
    "1e400",
    "true",
    "null",
];

/// A string: one of [`TRICKY`], the fuzzer's own text, or a concatenation of both.
pub fn string(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => (*u.choose(TRICKY)?).to_string(),
        1 => {
            let a = u.choose(TRICKY)?;
            let b: String = u.arbitrary()?;
            let c = u.choose(TRICKY)?;
            format!("{a}{b}{c}")
        }
        _ => u.arbitrary()?,
    })
}

/// A JSON value at most `depth` containers deep, with at most `width` items per container.
pub fn value(u: &mut Unstructured<'_>, depth: usize) -> Result<Value> {
    let width = 4;
    let kind = if depth == 0 {
        u.int_in_range(0..=3u8)?
    } else {
        u.int_in_range(0..=5u8)?
    };
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => match u.int_in_range(0..=2u8)? {
            0 => Value::Number(Number::from(u.arbitrary::<i64>()?)),
            1 => Value::Number(Number::from(u.arbitrary::<u64>()?)),
            _ => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        },
        3 => Value::String(string(u)?),
        4 => {
            let n = u.int_in_range(0..=width)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=width)?;
            let mut map = Map::new();
            for _ in 0..n {
                map.insert(string(u)?, value(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}
