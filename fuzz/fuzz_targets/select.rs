//! `select` (`tools::select::Select`, the JMESPath expression `api_execute` applies to a
//! response body) on expressions drawn from the fuzzer's bytes, biased towards what
//! multiplies a result (multi-selects of `@`, pipes, projections, flattens, functions), over a
//! generated body.
//!
//! Oracle (issue 41, item 1): compiling never panics; an expression either is refused when
//! compiled, fails on the body, is refused for its size, or gives a result whose JSON text is
//! at most the bound it was given (the bound holds however many times a shared value is
//! repeated), and building it never takes more memory than the bound allows (libFuzzer's
//! `-rss_limit_mb` catches a result that escapes it).

#![no_main]

use apigate::tools::select::{Room, Select};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Pieces an expression is made of: the ones that share and multiply first.
const PIECES: &[&str] = &[
    "@", "[@,@,@,@]", "|", ".", "[]", "[*]", "*", ",", "[", "]", "{a: @, b: @}", "{", "}",
    ": ", "a", "b", "items", "id", "name", "(", ")", "&&", "||", "!", "==", "<", "[?", "`1`",
    "'x'", "[0]", "[-1]", "[:2]", "[::-1]", "join('', ", "to_string(", "reverse(", "sort(",
    "keys(", "values(", "length(", "merge(", "map(&", "sort_by(@, &", "max_by(@, &",
    "to_array(", "not_null(", "nosuch(", "&",
];

fn expression(u: &mut Unstructured<'_>) -> Result<String> {
    let mut out = String::new();
    let n = u.int_in_range(1..=60)?;
    for _ in 0..n {
        if u.ratio(1, 8)? {
            out.push_str(&apigate_fuzz::string(u)?);
        } else {
            out.push_str(u.choose(PIECES)?);
        }
        if out.len() > 1024 {
            break;
        }
    }
    Ok(out)
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let text = expression(u)?;
    let body = match u.int_in_range(0..=2)? {
        0 => apigate_fuzz::value(u, 4)?,
        1 => serde_json::json!({"items": (0..50).map(|i| serde_json::json!({"id": i, "name": format!("item {i}"), "a": [i, i], "b": {"a": "\u{1}\""}})).collect::<Vec<_>>()}),
        _ => Value::Array(vec![serde_json::json!({"a": "x".repeat(500)}); 20]),
    };
    let bound = u.int_in_range(0..=64 * 1024)?;
    let Ok(select) = Select::parse(&text) else {
        return Ok(());
    };
    if let Ok(result) = select.apply(body, Room::json(bound)) {
        let len = serde_json::to_vec(&result).map(|t| t.len()).unwrap_or(0);
        assert!(len <= bound, "{text:?}: {len} bytes over the bound of {bound}");
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
