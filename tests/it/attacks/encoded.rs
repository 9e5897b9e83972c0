//! Issue 26, item 1: a credential must not come back through an encoded body, attacked for
//! real: apigate's HTTP server with an MCP client, and an upstream axum app that echoes the
//! credentials it received (`Authorization`, a static `X-Api-Key`, Basic user info) in a JSON
//! document that it sends gzip-, deflate- (zlib and raw), br- or zstd-encoded (or gzip twice),
//! as UTF-16 or UTF-32 text (by BOM, or by `charset` alone), as base64 or base64url text, or
//! base64 inside JSON; and a gzip, br and zstd bomb.
//!
//! - `encoded_echoes_never_show_a_credential`: every echo form, several pad lengths (so the
//!   credentials sit at every base64 alignment), both credential configurations: no piece of 6
//!   characters of any form (raw, base64 or base64url at any alignment) is in the tool result,
//!   nor in the bytes of a `base64` field, decompressed or with its NULs taken out; each
//!   compressed and UTF-16/32 echo is shown decoded (`[redacted]` where the credential was).
//! - `an_unknown_or_broken_encoding_is_described_not_shown`.
//! - `a_compression_bomb_is_cut_at_the_budget`.

use std::io::{Read, Write};
use std::net::SocketAddr;

use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::{echo_padded, echo_spec, echoed, execute, query_param, url_forms};
use crate::support::{Server, engine_args};

const TOKEN: &str = "sk_live_7Hq2LyjWDarjtT1zdp7dcXk9Q";
const API_KEY: &str = "ak_1f8e7d6c5b4a3210ZYXWvuts";
const API_USER: &str = "apiuser";
const API_PASSWORD: &str = "Pa55/w0rd+Sekr3t=x?>?";
/// The response budget.
const BUDGET: usize = 4096;
/// What a bomb expands to.
const BOMB_BYTES: usize = 10 * 1024 * 1024;

const FORMS: &[&str] = &[
    "gzip",
    "deflate",
    "deflate-raw",
    "br",
    "zstd",
    "gzip-gzip",
    "utf16le-bom",
    "utf16be-bom",
    "utf16le-charset",
    "utf16be-charset",
    "utf16-charset",
    "utf32le-bom",
    "utf32be-charset",
    "gzip-utf16le",
    "b64",
    "b64-nopad",
    "b64url",
    "b64-in-json",
];

fn spec() -> Value {
    let bomb = json!({
        "operationId": "bomb",
        "summary": "Ten megabytes of text, compressed",
        "parameters": [query_param("encoding")],
        "responses": {"200": {"description": "text"}}
    });
    let summary = "Echo the credentials received, encoded";
    echo_spec("Encoded echo", summary, "/bomb", bomb)
}

async fn start_echo() -> SocketAddr {
    let app = Router::new()
        .route("/api/echo", get(echo))
        .route("/api/bomb", get(bomb));
    crate::support::serve_app(app).await
}

type Params = Query<std::collections::HashMap<String, String>>;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn deflate_raw(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
    w.write_all(bytes).unwrap();
    w.into_inner()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

fn utf16(text: &str, le: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for unit in bom.then_some(0xFEFF).into_iter().chain(text.encode_utf16()) {
        out.extend(if le {
            unit.to_le_bytes()
        } else {
            unit.to_be_bytes()
        });
    }
    out
}

fn utf32(text: &str, le: bool, bom: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for c in bom.then_some('\u{feff}').into_iter().chain(text.chars()) {
        let c = u32::from(c);
        out.extend(if le { c.to_le_bytes() } else { c.to_be_bytes() });
    }
    out
}

/// The credentials received, after `pad`, as a JSON document in the form asked for.
async fn echo(headers: HeaderMap, Query(q): Params) -> Response {
    let doc = echoed(&headers, &q).to_string();
    let pad = q.get("pad").cloned().unwrap_or_default();
    let json_ct = "application/json";
    let (body, ct, encoding): (Vec<u8>, &str, Option<&str>) =
        match q.get("form").map(String::as_str).unwrap_or_default() {
            "gzip" => (gzip(doc.as_bytes()), json_ct, Some("gzip")),
            "deflate" => (zlib(doc.as_bytes()), json_ct, Some("deflate")),
            "deflate-raw" => (deflate_raw(doc.as_bytes()), json_ct, Some("deflate")),
            "br" => (brotli(doc.as_bytes()), json_ct, Some("br")),
            "zstd" => (zstd(doc.as_bytes()), json_ct, Some("zstd")),
            "gzip-gzip" => (gzip(&gzip(doc.as_bytes())), json_ct, Some("gzip, gzip")),
            "utf16le-bom" => (utf16(&doc, true, true), json_ct, None),
            "utf16be-bom" => (utf16(&doc, false, true), "text/plain", None),
            "utf16le-charset" => (
                utf16(&doc, true, false),
                "application/json; charset=utf-16le",
                None,
            ),
            "utf16be-charset" => (
                utf16(&doc, false, false),
                "application/json; charset=UTF-16BE",
                None,
            ),
            // No BOM and no byte order: what many servers send is little-endian.
            "utf16-charset" => (utf16(&doc, true, false), "text/plain; charset=utf-16", None),
            "utf32le-bom" => (utf32(&doc, true, true), json_ct, None),
            "utf32be-charset" => (
                utf32(&doc, false, false),
                "application/json; charset=utf-32be",
                None,
            ),
            "gzip-utf16le" => (
                gzip(&utf16(&doc, true, true)),
                "application/json; charset=utf-16le",
                Some("gzip"),
            ),
            "b64" => (STANDARD.encode(&doc).into_bytes(), "text/plain", None),
            "b64-nopad" => (
                base64::engine::general_purpose::STANDARD_NO_PAD
                    .encode(&doc)
                    .into_bytes(),
                "text/plain",
                None,
            ),
            "b64url" => (
                URL_SAFE_NO_PAD.encode(&doc).into_bytes(),
                "text/plain",
                None,
            ),
            "b64-in-json" => (
                json!({"pad": pad, "data": STANDARD.encode(&doc)})
                    .to_string()
                    .into_bytes(),
                json_ct,
                None,
            ),
            "unknown-encoding" => (doc.into_bytes(), json_ct, Some("x-secret-sauce")),
            // A gzip header, then the document as it is: not a valid gzip stream.
            "broken-gzip" => {
                let mut body = gzip(b"")[..10].to_vec();
                body.extend_from_slice(doc.as_bytes());
                (body, json_ct, Some("gzip"))
            }
            _ => (doc.into_bytes(), json_ct, None),
        };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
    if let Some(e) = encoding {
        h.insert(header::CONTENT_ENCODING, e.parse().unwrap());
    }
    response
}

/// [`BOMB_BYTES`] of `a`, compressed with `encoding`.
async fn bomb(Query(q): Params) -> Response {
    let text = vec![b'a'; BOMB_BYTES];
    let encoding = q.get("encoding").cloned().unwrap_or_default();
    let body = match encoding.as_str() {
        "br" => brotli(&text),
        "zstd" => zstd(&text),
        "gzip, gzip" => gzip(&gzip(&text)),
        _ => gzip(&text),
    };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
    h.insert(header::CONTENT_ENCODING, encoding.parse().unwrap());
    response
}

/// Every form of `secrets` an encoded echo can take: as is, percent-encoded, and base64 and
/// base64url of the secret at each of the three alignments inside a longer base64 text (the
/// characters that depend only on the secret).
fn forms(secrets: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for s in secrets {
        out.extend(url_forms(s));
        for k in 0..3 {
            let mut bytes = vec![b'.'; k];
            bytes.extend_from_slice(s.as_bytes());
            let whole = bytes.len() / 3 * 3;
            for engine in [STANDARD, URL_SAFE_NO_PAD] {
                let encoded = engine.encode(&bytes[..whole]);
                let from = if k == 0 { 0 } else { 4 };
                out.push(encoded[from..].to_string());
            }
        }
    }
    out
}

/// The first piece of 6 characters or more of any form in `hay`.
fn leaked_piece(hay: &[u8], forms: &[String]) -> Option<(String, String)> {
    for f in forms {
        for w in f.as_bytes().windows(6) {
            if hay.windows(6).any(|h| h == w) {
                return Some((String::from_utf8_lossy(w).into_owned(), f.clone()));
            }
        }
    }
    None
}

/// Everything a `base64` field of the result could give the agent: its bytes, those bytes
/// without NULs (UTF-16/32 text), and those bytes decompressed in every way.
fn decoded_payloads(shown: &Value) -> Vec<Vec<u8>> {
    let Some(b64) = shown["body"]["base64"].as_str() else {
        return Vec::new();
    };
    let raw = STANDARD.decode(b64).expect("the base64 field is base64");
    let mut out = vec![raw.clone()];
    let mut read = |mut r: Box<dyn Read + '_>| {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        out.push(buf);
    };
    read(Box::new(flate2::read::MultiGzDecoder::new(&raw[..])));
    read(Box::new(flate2::read::ZlibDecoder::new(&raw[..])));
    read(Box::new(flate2::read::DeflateDecoder::new(&raw[..])));
    read(Box::new(brotli::Decompressor::new(&raw[..], 4096)));
    if let Ok(d) = zstd::stream::read::Decoder::new(&raw[..]) {
        read(Box::new(d));
    }
    let mut with_nuls_out: Vec<Vec<u8>> = out
        .iter()
        .map(|b| b.iter().copied().filter(|&c| c != 0).collect())
        .collect();
    out.append(&mut with_nuls_out);
    out
}

/// The two credential configurations, each with its secrets: `Authorization: Bearer` and a
/// static `X-Api-Key`; Basic user info on `--upstream` and the same `X-Api-Key`.
async fn servers(addr: SocketAddr) -> Vec<(Server, Vec<String>)> {
    let mut out = Vec::new();
    let mut args = engine_args(
        &super::spec_file("encoded-echo", &spec()),
        Some(format!("http://{addr}")),
    );
    args.upstream_headers = vec![
        format!("Authorization: Bearer {TOKEN}"),
        format!("X-Api-Key: {API_KEY}"),
    ];
    args.max_response_bytes = BUDGET;
    out.push((
        Server::start(args, false).await,
        vec![format!("Bearer {TOKEN}"), TOKEN.into(), API_KEY.into()],
    ));
    let password_in_url = utf8_percent_encode(API_PASSWORD, NON_ALPHANUMERIC).to_string();
    let mut args = engine_args(
        &super::spec_file("encoded-echo", &spec()),
        Some(format!("http://{API_USER}:{password_in_url}@{addr}")),
    );
    args.upstream_headers = vec![format!("X-Api-Key: {API_KEY}")];
    args.max_response_bytes = BUDGET;
    let b64 = STANDARD.encode(format!("{API_USER}:{API_PASSWORD}"));
    out.push((
        Server::start(args, false).await,
        vec![
            format!("Basic {b64}"),
            b64,
            format!("{API_USER}:{API_PASSWORD}"),
            API_PASSWORD.into(),
            API_KEY.into(),
        ],
    ));
    out
}

/// Every echo form at several pad lengths, in both configurations. All failures are collected
/// first, leaks apart, so one run says which forms leak.
#[tokio::test]
async fn encoded_echoes_never_show_a_credential() {
    let addr = start_echo().await;
    let (mut leaks, mut not_decoded) = (Vec::new(), Vec::new());
    for (server, secrets) in servers(addr).await {
        let forms = forms(&secrets);
        let client = server.client().await;
        for form in FORMS {
            for pad in 0..6 {
                let (shown, text) = echo_padded(&client, pad, form).await;
                if let Some((piece, of)) = leaked_piece(text.as_bytes(), &forms) {
                    leaks.push(format!("{form}, pad {pad}: {piece:?} (of {of:?}): {text}"));
                }
                for bytes in decoded_payloads(&shown) {
                    if let Some((piece, of)) = leaked_piece(&bytes, &forms) {
                        leaks.push(format!(
                            "{form}, pad {pad}: {piece:?} (of {of:?}) in the bytes of the \
                             base64 field: {text}"
                        ));
                    }
                }
                // Decoded and shown, with the credentials replaced; the upstream's length
                // described bytes the agent does not see.
                // Under `text/plain` the JSON document is shown as text.
                let body = match &shown["body"] {
                    Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                    other => other.clone(),
                };
                if !form.starts_with("b64")
                    && (body["authorization"] != "[redacted]"
                        || body["x-api-key"] != "[redacted]"
                        || body["pad"] != ".".repeat(pad)
                        || shown["truncated"] != false
                        || shown["headers"].get("content-length").is_some())
                {
                    not_decoded.push(format!("{form}, pad {pad}: {text}"));
                }
            }
        }
        client.cancel().await.unwrap();
    }
    assert!(
        leaks.is_empty() && not_decoded.is_empty(),
        "{} results leaked a credential:\n{}\n\n{} were not shown decoded:\n{}",
        leaks.len(),
        leaks.join("\n"),
        not_decoded.len(),
        not_decoded.join("\n")
    );
}

#[tokio::test]
async fn an_unknown_or_broken_encoding_is_described_not_shown() {
    let addr = start_echo().await;
    for (server, secrets) in servers(addr).await {
        let forms = forms(&secrets);
        let client = server.client().await;
        for form in ["unknown-encoding", "broken-gzip"] {
            let (shown, text) = execute(&client, "echo", json!({"pad": "x", "form": form})).await;
            assert_eq!(shown["status"], 200, "{form}: {text}");
            let body = &shown["body"];
            assert!(
                body.get("base64").is_none(),
                "{form}: raw bytes shown: {text}"
            );
            assert!(body["bytes"].as_u64().unwrap() > 0, "{form}: {text}");
            let note = body["note"].as_str().unwrap_or_default();
            assert!(note.contains("not be decoded"), "{form}: {text}");
            if let Some((piece, of)) = leaked_piece(text.as_bytes(), &forms) {
                panic!("{form}: {piece:?} (of {of:?}) reached the agent: {text}");
            }
        }
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_compression_bomb_is_cut_at_the_budget() {
    let addr = start_echo().await;
    let (server, _) = servers(addr).await.remove(0);
    let client = server.client().await;
    for encoding in ["gzip", "br", "zstd", "gzip, gzip"] {
        let (shown, text) = execute(&client, "bomb", json!({"encoding": encoding})).await;
        assert_eq!(shown["status"], 200, "{encoding}: {text}");
        assert_eq!(shown["truncated"], true, "{encoding}: {text}");
        let body = shown["body"]
            .as_str()
            .unwrap_or_else(|| panic!("{encoding}: not text: {text}"));
        assert!(
            body.len() <= BUDGET && body.len() > BUDGET / 2 && body.bytes().all(|b| b == b'a'),
            "{encoding}: {} bytes shown",
            body.len()
        );
    }
    client.cancel().await.unwrap();
}
