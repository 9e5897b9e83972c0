//! `upstream::shown_response`, the path of every upstream answer from its raw bytes (issue 26):
//! the `Content-Encoding` undone within the budget, UTF-16/32 text transcoded, then scrubbed,
//! cut and shown. Generated bodies hold the credentials of a real `UpstreamConfig` (`--upstream`
//! with user info, a `Bearer`/`Token`/bare credential header) planted as they are, among text
//! without capital letters; then the body is wrapped: as UTF-16/32 (by mark or by `charset`,
//! sometimes the wrong byte order declared), as base64 or base64url text, compressed with
//! gzip, zlib or raw deflate, br or zstd (up to three layers, sometimes with a wrong or
//! unknown `Content-Encoding`, sometimes with bytes flipped), or repeated into a bomb; the raw
//! bytes are cut at the budget as `read_limited` cuts them.
//!
//! Oracle: no piece of 6 characters of a credential (one with a capital letter), nor of its
//! base64 or base64url form at any alignment (a piece of 8), in the result's JSON text, its
//! decoded strings, or the bytes of a binary body's `base64` field, as they are, with their
//! NULs taken out, or decompressed in any way. The decoded body never exceeds the budget: a
//! result is at most 8 bytes of JSON per byte of budget plus a constant.

#![no_main]

use std::collections::HashSet;
use std::io::{Read, Write};

use apigate::upstream::{Received, UpstreamConfig, shown_response};
use arbitrary::{Result, Unstructured};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

const USER: &str = "apiuser";
const TOKEN_CHARS: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ0123456789-._~+/=";
const PASSWORD_CHARS: &[char] = &[
    'A', 'B', 'C', 'D', 'K', 'Q', 'X', 'Z', '1', '7', '9', '@', ':', '/', '%', '+', ' ', '!', '&',
    '=', '?', '#', 'é',
];
const SCHEMES: &[&str] = &["Bearer", "Token", ""];
const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "text/plain",
    "",
    "application/octet-stream",
];
const CODINGS: &[&str] = &["gzip", "x-gzip", "deflate", "br", "zstd"];
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
    "é",
    "\u{1f600}",
    "\u{0}",
    "null",
    "=",
    "/",
    "+",
    "bearer ",
    "basic ",
];

fn chars(u: &mut Unstructured<'_>, min: usize, max: usize, from: &[char]) -> Result<String> {
    let n = u.int_in_range(min..=max)?;
    (0..n).map(|_| u.choose(from).copied()).collect()
}

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

fn compress(coding: &str, bytes: &[u8], level: u32) -> Vec<u8> {
    let level = level % 10;
    match coding {
        "gzip" | "x-gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(bytes).expect("in memory");
            e.finish().expect("in memory")
        }
        "deflate" if level % 2 == 0 => {
            let mut e =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(bytes).expect("in memory");
            e.finish().expect("in memory")
        }
        "deflate" => {
            let mut e =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
            e.write_all(bytes).expect("in memory");
            e.finish().expect("in memory")
        }
        "br" => {
            let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, level, 22);
            w.write_all(bytes).expect("in memory");
            w.into_inner()
        }
        _ => zstd::encode_all(bytes, level as i32).expect("in memory"),
    }
}

fn utf16(text: &str, le: bool, bom: bool) -> Vec<u8> {
    let units = bom.then_some(0xFEFF).into_iter().chain(text.encode_utf16());
    units
        .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
        .collect()
}

fn utf32(text: &str, le: bool, bom: bool) -> Vec<u8> {
    let chars = bom.then_some('\u{feff}').into_iter().chain(text.chars());
    chars
        .map(u32::from)
        .flat_map(|c| if le { c.to_le_bytes() } else { c.to_be_bytes() })
        .collect()
}

/// The characters of base64(`secret`) that depend only on it, at each alignment.
fn base64_pieces(secret: &str, out: &mut Vec<String>) {
    for k in 0..3 {
        let mut b = vec![b'.'; k];
        b.extend_from_slice(secret.as_bytes());
        let whole = b.len() / 3 * 3;
        let from = if k == 0 { 0 } else { 4 };
        for e in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            if let Some(s) = e.encode(&b[..whole]).get(from..) {
                out.push(s.to_string());
            }
        }
    }
}

struct Case {
    header: String,
    upstream: String,
    secrets: Vec<String>,
    raw: Vec<u8>,
    content_type: String,
    content_encoding: Option<String>,
    budget: usize,
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
        Some(chars(u, 8, 24, PASSWORD_CHARS)?)
    } else {
        None
    };
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
            let b64 = STANDARD.encode(&user_pass);
            secrets.extend([format!("Basic {b64}"), b64, user_pass, p.clone()]);
            let in_url = utf8_percent_encode(p, NON_ALPHANUMERIC);
            format!("http://{USER}:{in_url}@127.0.0.1:9/v1")
        }
        None => "http://127.0.0.1:9/v1".to_string(),
    };
    secrets.retain(|s| s.len() >= 8);
    // The plain body: filler and credentials as they are.
    let mut text = String::new();
    for _ in 0..u.int_in_range(0..=10usize)? {
        if u.arbitrary()? && !secrets.is_empty() {
            text.push_str(u.choose(&secrets)?);
        } else {
            text.push_str(&filler(u)?);
        }
    }
    let mut content_type = (*u.choose(CONTENT_TYPES)?).to_string();
    // The text's encoding.
    let mut body = match u.int_in_range(0..=8u8)? {
        0 => {
            let (le, bom): (bool, bool) = (u.arbitrary()?, u.arbitrary()?);
            if !bom || u.arbitrary()? {
                // Declared, sometimes in the wrong byte order.
                let said = if u.ratio(1, 5)? { !le } else { le };
                let name = match u.int_in_range(0..=2u8)? {
                    0 => "utf-16",
                    _ if said => "utf-16le",
                    _ => "utf-16be",
                };
                content_type = format!("text/plain; charset={name}");
            }
            utf16(&text, le, bom)
        }
        1 => {
            let (le, bom): (bool, bool) = (u.arbitrary()?, u.arbitrary()?);
            if !bom {
                content_type = format!(
                    "application/json; charset=utf-32{}",
                    if le { "le" } else { "be" }
                );
            }
            utf32(&text, le, bom)
        }
        2 => STANDARD.encode(&text).into_bytes(),
        3 => URL_SAFE_NO_PAD.encode(&text).into_bytes(),
        _ => text.into_bytes(),
    };
    // Content codings, applied in order.
    let mut applied = Vec::new();
    for _ in 0..u.int_in_range(0..=3usize)? {
        let c = *u.choose(CODINGS)?;
        let level: u32 = u.arbitrary()?;
        // Sometimes a bomb: the body repeated before it is compressed.
        if u.ratio(1, 8)? {
            let times = u.int_in_range(1..=2000usize)?;
            body = body.repeat(times);
        }
        body = compress(c, &body, level);
        applied.push(c.to_string());
    }
    let mut content_encoding = (!applied.is_empty()).then(|| applied.join(", "));
    match u.int_in_range(0..=15u8)? {
        // Says a coding it did not apply, or an unknown one.
        0 => content_encoding = Some((*u.choose(CODINGS)?).to_string()),
        1 => content_encoding = Some(filler(u)?),
        // Bytes flipped.
        2 if !body.is_empty() => {
            for _ in 0..u.int_in_range(1..=4usize)? {
                let i = u.choose_index(body.len())?;
                body[i] ^= u.int_in_range(1..=255u8)?;
            }
        }
        _ => {}
    }
    let budget = u.int_in_range(0..=body.len().max(64) * 2)?;
    Ok(Case {
        header: format!("{name}: {value}"),
        upstream,
        secrets,
        raw: body,
        content_type,
        content_encoding,
        budget,
    })
}

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

/// `raw`, and whatever decompressing it in any way gives (at most 1 MiB each).
fn unpacked(raw: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![raw.to_vec()];
    let mut read = |r: Box<dyn Read + '_>| {
        let mut buf = Vec::new();
        let _ = r.take(1 << 20).read_to_end(&mut buf);
        out.push(buf);
    };
    read(Box::new(flate2::read::MultiGzDecoder::new(raw)));
    read(Box::new(flate2::read::ZlibDecoder::new(raw)));
    read(Box::new(flate2::read::DeflateDecoder::new(raw)));
    read(Box::new(brotli::Decompressor::new(raw, 4096)));
    if let Ok(d) = zstd::stream::read::Decoder::new(raw) {
        read(Box::new(d));
    }
    let without_nuls: Vec<Vec<u8>> = out
        .iter()
        .map(|b| b.iter().copied().filter(|&c| c != 0).collect())
        .collect();
    out.extend(without_nuls);
    out
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
    let truncated = case.raw.len() > case.budget;
    let read = case.raw[..case.raw.len().min(case.budget)].to_vec();
    let ct = (!case.content_type.is_empty()).then_some(case.content_type.as_str());
    let received = Received {
        truncated,
        content_type: ct,
        content_encoding: case.content_encoding.as_deref(),
    };
    let shown = shown_response(read, received, case.budget, &secrets);
    let text = shown.body.to_string();
    assert!(
        text.len() <= 8 * case.budget + 512,
        "{} bytes of JSON for a budget of {}",
        text.len(),
        case.budget
    );

    let mut pieces: HashSet<Vec<u8>> = HashSet::new();
    for s in &case.secrets {
        for w in s.as_bytes().windows(6) {
            if w.iter().any(u8::is_ascii_uppercase) {
                pieces.insert(w.to_vec());
            }
        }
        let mut b64 = Vec::new();
        base64_pieces(s, &mut b64);
        for f in b64 {
            pieces.extend(f.as_bytes().windows(8).map(<[u8]>::to_vec));
        }
    }
    let mut haystacks: Vec<Vec<u8>> = vec![text.clone().into_bytes()];
    let mut decoded = Vec::new();
    strings(&shown.body, &mut decoded);
    haystacks.extend(decoded.iter().map(|s| s.as_bytes().to_vec()));
    if let Some(b64) = shown.body.get("base64").and_then(Value::as_str) {
        let raw = STANDARD.decode(b64).expect("valid base64");
        haystacks.extend(unpacked(&raw));
    }
    for hay in &haystacks {
        for n in [6, 8] {
            if let Some(w) = hay.windows(n).find(|w| pieces.contains(*w)) {
                panic!(
                    "{:?} of a credential reached the agent (budget {}, {:?}, {:?}): {text}",
                    String::from_utf8_lossy(w),
                    case.budget,
                    case.content_type,
                    case.content_encoding,
                );
            }
        }
    }
});
