//! The upstream's answer as `api_execute` returns it: the body read incrementally up to a
//! budget (never buffered whole), its content encoding undone and UTF-16/32 text transcoded
//! within that budget (`decode`), scrubbed of every configured credential before it is cut,
//! cut at a valid JSON boundary when too long (never inside a credential), binary content
//! reported by type and size, and a safe allow-list of response headers (never `Set-Cookie`).

use serde::Serialize;
use serde_json::{Map, Value, json};
use url::Url;

use super::budget::CallBudget;
use super::cut::cut_json;
use super::decode;
use super::redact::Secrets;

/// The API's answer as `api_execute` shows it: `{status, ok, headers, body, truncated,
/// durationMs}` (the doc comments are the descriptions of its output schema).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamResponse {
    pub status: u16,
    /// The API answered 2xx (a 4xx is a result too, with `ok` false: read its body).
    pub ok: bool,
    /// The response headers an agent may see, lower-case names; with `select`, only those an
    /// agent acts on (`link`, `location`, `retry-after`, the rate limit's remaining and reset,
    /// `content-type`).
    pub headers: Map<String, Value>,
    /// Parsed JSON, text, or null. A binary answer (a type that is not text, and bytes that
    /// are not text) is described: {contentType, bytes, sha256, returnedAs, uri?, expiresAt?,
    /// file?, note?}. returnedAs `image`: the bytes are an image content item of this result;
    /// `resource_link`: a resource_link item, `uri` (apigate://responses/<id>) readable with
    /// resources/read by the same API key until `expiresAt`. `file`: where `apigate dev
    /// --download-dir` wrote it. `note`: why nothing was returned (over --max-read-bytes, a
    /// credential inside, over --max-held-bytes).
    pub body: Value,
    /// Something of the body is not shown (see `cut` and `note`).
    pub truncated: bool,
    /// How long the API took, in milliseconds (left out with `select`).
    pub duration_ms: Option<u64>,
    /// The whole body when it is binary (not text by type and content), complete, within
    /// `--max-read-bytes` and free of credentials; `body` then describes it
    /// (`{contentType, bytes, sha256}`). Never serialized: `tools::binary_out` decides how it
    /// reaches the client.
    #[serde(skip)]
    pub binary: Option<BinaryBody>,
}

/// A complete binary response body, as the upstream sent it (content encoding undone).
#[derive(Clone)]
pub struct BinaryBody {
    /// The response's media type, lower-case, parameters dropped; `application/octet-stream`
    /// when it named none.
    pub content_type: String,
    pub bytes: bytes::Bytes,
    /// Lower-case hex SHA-256 of `bytes`.
    pub sha256: String,
}

impl std::fmt::Debug for BinaryBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinaryBody")
            .field("content_type", &self.content_type)
            .field("len", &self.bytes.len())
            .field("sha256", &self.sha256)
            .finish()
    }
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

/// Of the headers an agent may see, those it acts on when it asked for part of the body: where
/// the next page is (`link`), where a created resource is (`location`), when to try again
/// (`retry-after`, a rate limit's remaining calls and reset time) and what the body is.
/// Request ids, caching, byte counts and the rate limit's other numbers are left out.
fn is_acted_on(name: &str) -> bool {
    const RATE_LIMIT: [&str; 3] = ["x-ratelimit-", "x-rate-limit-", "ratelimit-"];
    // `ratelimit` is the IETF draft's one header holding both (`limit=100, remaining=50,
    // reset=5`); `…-remaining-minute`, `…-reset-after` are other APIs' spellings.
    matches!(
        name,
        "link" | "location" | "retry-after" | "content-type" | "ratelimit"
    ) || RATE_LIMIT.iter().any(|prefix| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("remaining") || rest.starts_with("reset"))
    })
}

impl UpstreamResponse {
    /// For a call with `select`: keeps only the headers an agent acts on and leaves out the
    /// timing, so that a small selected body is not outweighed by what it did not ask for.
    pub fn keep_acted_on(&mut self) {
        self.headers.retain(|name, _| is_acted_on(name));
        self.duration_ms = None;
    }
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

/// Reads the body chunk by chunk and stops after `max` bytes, or when the call's `budget`
/// refuses a chunk (it remembers why). Returns the bytes and whether more was left unread.
pub(crate) async fn read_limited(
    resp: &mut reqwest::Response,
    max: usize,
    budget: &mut CallBudget,
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
        let take = chunk.len().min(room);
        if budget.take(take).is_err() {
            return Ok((buf, true));
        }
        if chunk.len() > room {
            decode::extend_within(&mut buf, &chunk[..room], max);
            return Ok((buf, true));
        }
        decode::extend_within(&mut buf, &chunk, max);
    }
    Ok((buf, false))
}

/// Binary bodies whose base64 form is at most this long (16 KiB before encoding), and fits the
/// response budget, come back base64-encoded; larger ones as type and size.
const MAX_BASE64_CHARS: usize = 16 * 1024 / 3 * 4 + 4;

/// What the agent is shown of a response body, from its raw bytes (at most `budget`,
/// `raw_truncated` when the upstream sent more).
#[derive(Debug, Clone)]
pub struct ShownBody {
    pub body: Value,
    /// The body shown is cut: the raw bytes were, or their decoded form was over the budget.
    pub truncated: bool,
    /// What is shown is not the upstream's bytes (a content encoding undone, or text
    /// transcoded): the upstream's `Content-Length` no longer describes it.
    pub transformed: bool,
}

/// The memory a body's parse may take (what is left of the call's budget), and what it took.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParseRoom {
    /// Bytes the parsed body may take: [`VALUE_BYTES`] per JSON value beside its text.
    pub room: usize,
    /// Bytes it took.
    pub cost: usize,
    /// The body would have taken more: it was cut to the shown budget instead.
    pub over: bool,
    /// The bytes its content encoding decoded to (0 without one).
    pub decoded: usize,
}

impl ParseRoom {
    pub(crate) fn new(room: usize) -> ParseRoom {
        ParseRoom {
            room,
            cost: 0,
            over: false,
            decoded: 0,
        }
    }
}

/// What one JSON value of a parsed body costs in memory beside its text (a `Value`, its
/// place in an array or a map).
pub(crate) const VALUE_BYTES: usize = 112;

/// `bytes` parsed as JSON within `room` bytes of memory, each value counted as it is built
/// ([`VALUE_BYTES`] plus its text): `Ok(None)` when it would take more (nothing more is built),
/// `Err` when it is not JSON.
pub(crate) fn parse_within(
    bytes: &[u8],
    room: usize,
) -> Result<Option<(Value, usize)>, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut left = room;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Within { left: &mut left }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match parsed {
        Ok(v) => Ok(Some((v, room - left))),
        Err(_) if left == 0 => Ok(None),
        Err(e) => Err(e),
    }
}

/// A JSON value built within what is `left` of a room (`parse_within`).
struct Within<'a> {
    left: &'a mut usize,
}

impl Within<'_> {
    fn take<E: serde::de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        match self.left.checked_sub(bytes + VALUE_BYTES) {
            Some(l) => {
                *self.left = l;
                Ok(())
            }
            None => {
                *self.left = 0;
                Err(E::custom("over the parse budget"))
            }
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Within<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Within<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E: serde::de::Error>(mut self, v: bool) -> Result<Value, E> {
        self.take::<E>(0)?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(mut self, v: i64) -> Result<Value, E> {
        self.take::<E>(0)?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde::de::Error>(mut self, v: u64) -> Result<Value, E> {
        self.take::<E>(0)?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(mut self, v: f64) -> Result<Value, E> {
        self.take::<E>(0)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> Result<Value, E> {
        self.take::<E>(v.len())?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: serde::de::Error>(mut self, v: String) -> Result<Value, E> {
        self.take::<E>(v.len())?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: serde::de::Error>(mut self) -> Result<Value, E> {
        self.take::<E>(0)?;
        Ok(Value::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.take::<A::Error>(0)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Within {
            left: &mut *self.left,
        })? {
            out.push(v);
        }
        // No room left over from doubling: the count above is what it holds.
        out.shrink_to_fit();
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        self.take::<A::Error>(0)?;
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            self.take::<A::Error>(k.len())?;
            let v = map.next_value_seed(Within {
                left: &mut *self.left,
            })?;
            entries.push((k, v));
        }
        // A map of exactly its entries (a growing one holds room for four at least).
        let mut out = Map::with_capacity(entries.len());
        out.extend(entries);
        Ok(Value::Object(out))
    }
}

/// How a body read from the upstream came: whether reading stopped at the cap (`truncated`:
/// the upstream sent more), and the `Content-Type` and `Content-Encoding` it was labelled with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received<'a> {
    pub truncated: bool,
    pub content_type: Option<&'a str>,
    pub content_encoding: Option<&'a str>,
}

/// The body as the agent sees it, from the raw bytes read: the `Content-Encoding` undone
/// within the budget ([`decode::decode_content`]: a bomb is cut, not expanded), then
/// [`shown_body`]. A body whose encoding is unknown or broken is described by type, encoding
/// and size only: its raw bytes are never shown.
pub fn shown_response(
    raw: Vec<u8>,
    received: Received<'_>,
    budget: usize,
    secrets: &Secrets,
) -> ShownBody {
    read_response(
        raw,
        received,
        budget,
        budget,
        secrets,
        &mut ParseRoom::new(usize::MAX),
    )
}

/// [`shown_response`] with the read budget (`--max-read-bytes`: how far the encoding is
/// undone and text kept, before `select` and [`super::fit`]) apart from the shown budget
/// (`--max-response-bytes`, which bounds a binary body's base64 form), and the memory the
/// parsed body may take (`parse`: a body that would take more is cut to the shown budget).
pub(crate) fn read_response(
    raw: Vec<u8>,
    received: Received<'_>,
    read_budget: usize,
    shown_budget: usize,
    secrets: &Secrets,
    parse: &mut ParseRoom,
) -> ShownBody {
    let raw_len = raw.len();
    let decoded = decode::decode_content(
        raw,
        received.truncated,
        received.content_encoding,
        read_budget,
    );
    if let Ok(d) = &decoded
        && d.decoded
    {
        parse.decoded = d.bytes.len();
    }
    shown_decoded_within(decoded, raw_len, received, shown_budget, secrets, parse)
}

/// [`read_response`] once the content encoding was undone (or failed to be), for a caller that
/// decoded the body itself (`binary::classify`): the decoded bytes shown as text, JSON or
/// binary, or an undecodable body described by type, encoding and its `raw_len` raw bytes.
pub(crate) fn shown_decoded(
    decoded: Result<decode::Decoded, decode::DecodeError>,
    raw_len: usize,
    received: Received<'_>,
    shown_budget: usize,
    secrets: &Secrets,
) -> ShownBody {
    let mut parse = ParseRoom::new(usize::MAX);
    shown_decoded_within(
        decoded,
        raw_len,
        received,
        shown_budget,
        secrets,
        &mut parse,
    )
}

/// [`shown_decoded`] within a parse room.
fn shown_decoded_within(
    decoded: Result<decode::Decoded, decode::DecodeError>,
    raw_len: usize,
    received: Received<'_>,
    shown_budget: usize,
    secrets: &Secrets,
    parse: &mut ParseRoom,
) -> ShownBody {
    let Received {
        truncated: raw_truncated,
        content_type,
        content_encoding,
    } = received;
    match decoded {
        Ok(d) => {
            let (body, transcoded) = shown_body_transcoded(
                &d.bytes,
                d.truncated,
                content_type,
                shown_budget,
                secrets,
                parse,
            );
            ShownBody {
                body,
                truncated: d.truncated || parse.over,
                transformed: d.decoded || transcoded,
            }
        }
        Err(e) => {
            let ct = content_type.unwrap_or_default().to_ascii_lowercase();
            let mut body = json!({
                "contentType": if ct.is_empty() { "application/octet-stream" } else { &ct },
                "contentEncoding": content_encoding.unwrap_or_default(),
                "bytes": raw_len,
                "note": format!("the body could not be decoded: {e}; not shown"),
            });
            secrets.redact_value(&mut body);
            ShownBody {
                body,
                truncated: raw_truncated,
                transformed: true,
            }
        }
    }
}

/// The body as the agent sees it, from the bytes read (at most `budget`; `truncated` when the
/// upstream sent more) with no content encoding left: UTF-16/32 text becomes UTF-8
/// ([`decode::to_utf8`]), every form of a configured credential is replaced by `[redacted]`
/// in the bytes, then the body becomes parsed JSON (cut to a valid prefix of at most `budget`
/// bytes when `truncated`), text (cut on a character boundary), or `{contentType, bytes,
/// base64?}` for binary content; a cut never leaves the beginning of a credential at the end of
/// the cut text, and the decoded strings are scrubbed again (an escaped credential).
pub fn shown_body(
    bytes: &[u8],
    truncated: bool,
    content_type: Option<&str>,
    budget: usize,
    secrets: &Secrets,
) -> Value {
    let mut parse = ParseRoom::new(usize::MAX);
    shown_body_transcoded(bytes, truncated, content_type, budget, secrets, &mut parse).0
}

/// [`shown_body`], and whether the text was transcoded.
fn shown_body_transcoded(
    bytes: &[u8],
    truncated: bool,
    content_type: Option<&str>,
    budget: usize,
    secrets: &Secrets,
    parse: &mut ParseRoom,
) -> (Value, bool) {
    if bytes.is_empty() {
        return (Value::Null, false);
    }
    let ct = content_type.unwrap_or_default().to_ascii_lowercase();
    let utf8 = decode::to_utf8(bytes, truncated, &ct);
    // Text read in the wrong byte order still decodes (to other characters), and the agent
    // could turn it back: a credential seen in the bytes must be seen in the text too.
    if let Some(text) = &utf8
        && holds_secret(bytes, secrets)
        && !secrets.holds(text)
    {
        return (binary(bytes, truncated, &ct, budget, true), true);
    }
    let mut text = utf8.as_deref().unwrap_or(bytes);
    // A cut body first loses the beginning of a credential the cut left at its end: scrubbing
    // could otherwise replace a whole encoded form inside it and leave the rest (`Basic ` of
    // a cut `Basic dXNlcjpwYXNz…`).
    if truncated {
        text = &text[..text.len() - secrets.cut_tail_len(text)];
    }
    let scrubbed = secrets.scrub(text);
    let mut body = body_value(&scrubbed, truncated, &ct, secrets, budget, parse)
        .unwrap_or_else(|| binary(bytes, truncated, &ct, budget, holds_secret(bytes, secrets)));
    secrets.redact_value(&mut body);
    (body, utf8.is_some())
}

/// Whether `bytes` (no content encoding left; `truncated` when cut short) are text as
/// [`shown_body`] would show them: UTF-8 (or UTF-16/32 by a byte-order mark or `charset` of
/// `ct`) without control characters other than tab, line feed, form feed, carriage return
/// and escape.
pub(super) fn is_text(bytes: &[u8], truncated: bool, ct: &str) -> bool {
    let utf8 = decode::to_utf8(bytes, truncated, ct);
    text_str(utf8.as_deref().unwrap_or(bytes), truncated).is_some()
}

/// Whether binary `bytes` hold a credential: as they are, or with their NUL bytes taken out
/// (the ASCII of a credential in UTF-16 or UTF-32 text that did not decode as such).
pub(super) fn holds_secret(bytes: &[u8], secrets: &Secrets) -> bool {
    if secrets.is_empty() {
        return false;
    }
    if secrets.holds(bytes) {
        return true;
    }
    bytes.contains(&0) && {
        let without: Vec<u8> = bytes.iter().copied().filter(|&b| b != 0).collect();
        secrets.holds(&without)
    }
}

/// Parsed JSON, JSON cut to a valid prefix when `truncated`, or text; `None` for content that
/// is not text (see [`as_text`]). The parse takes at most `parse.room` bytes of memory: a body
/// that would take more is cut to a valid prefix of the shown `budget` (`parse.over`), and a
/// `truncated` one is cut to a prefix its worst-case parse fits in.
fn body_value(
    bytes: &[u8],
    truncated: bool,
    ct: &str,
    secrets: &Secrets,
    budget: usize,
    parse: &mut ParseRoom,
) -> Option<Value> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    let looks_json = ct.contains("json") || (ct.is_empty() && matches!(first, Some(b'{' | b'[')));
    // The most a JSON text's parse takes per byte: `[1,1,…]` is a value every two bytes.
    let worst = |len: usize| len.saturating_mul(VALUE_BYTES / 2 + 1);
    let prefix = |parse: &ParseRoom| {
        bytes
            .len()
            .min(budget.max(parse.room / (VALUE_BYTES / 2 + 1)))
    };
    if looks_json {
        let parsed = if truncated {
            let keep = prefix(parse);
            parse.over |= keep < bytes.len();
            parse.cost = parse.cost.saturating_add(worst(keep));
            cut_json(&bytes[..keep], keep, secrets)
        } else {
            match parse_within(bytes, parse.room) {
                Ok(Some((v, cost))) => {
                    parse.cost = parse.cost.saturating_add(cost);
                    Some(v)
                }
                Ok(None) => {
                    parse.over = true;
                    let keep = bytes.len().min(budget);
                    parse.cost = parse.cost.saturating_add(worst(keep));
                    cut_json(&bytes[..keep], keep, secrets)
                }
                Err(_) => None,
            }
        };
        if let Some(v) = parsed {
            return Some(v);
        }
    }
    let mut text = as_text(bytes, truncated)?;
    parse.cost = parse.cost.saturating_add(text.len());
    if truncated {
        secrets.trim_partial_tail(&mut text);
    }
    Some(Value::String(text))
}

/// The body as text, or `None` when it is not text whatever its content type says: not UTF-8
/// (apart from a character cut off at the end of a truncated body), or holding control
/// characters other than tab, line feed, form feed, carriage return and escape (each would
/// come back as a six-byte `\u00XX`).
fn as_text(bytes: &[u8], truncated: bool) -> Option<String> {
    text_str(bytes, truncated).map(str::to_string)
}

/// [`as_text`] without the copy.
fn text_str(bytes: &[u8], truncated: bool) -> Option<&str> {
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => s,
        // Cut in the middle of a character: drop the partial character.
        Err(e) if truncated && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    let binary = text
        .bytes()
        .any(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | 0x0c | b'\r' | 0x1b));
    (!binary).then_some(text)
}

/// A binary body as `{contentType, bytes, base64?}`: base64 only for a complete body whose
/// encoding fits both [`MAX_BASE64_CHARS`] and the response budget, and that holds no
/// configured credential (its base64 form would pass every text redaction).
fn binary(bytes: &[u8], truncated: bool, ct: &str, budget: usize, holds_secret: bool) -> Value {
    use base64::Engine as _;
    let len = bytes.len();
    let mut out = json!({
        "contentType": if ct.is_empty() { "application/octet-stream" } else { ct },
        "bytes": len,
    });
    let encoded_len = len.div_ceil(3) * 4;
    let limit = budget.min(MAX_BASE64_CHARS);
    if truncated {
        out["note"] = Value::String(format!(
            "binary content, more than {len} bytes: larger than the response budget; not shown"
        ));
    } else if holds_secret {
        out["note"] =
            Value::String("binary content holding a configured credential; not shown".into());
    } else if encoded_len > limit {
        out["note"] = Value::String(format!(
            "binary content: its base64 form would take {encoded_len} bytes, over the limit \
             of {limit}; not shown"
        ));
    } else {
        out["base64"] = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(s: &str, limit: usize) -> Option<Value> {
        let v = cut_json(
            &s.as_bytes()[..limit.min(s.len())],
            limit,
            &Secrets::default(),
        )?;
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

    fn body(bytes: &[u8], truncated: bool, ct: Option<&str>) -> Value {
        shown_body(bytes, truncated, ct, 64 * 1024, &Secrets::default())
    }

    #[test]
    fn text_and_binary_bodies() {
        assert_eq!(body(b"", false, None), Value::Null);
        assert_eq!(
            body(b"{\"a\":1}", false, Some("application/json")),
            json!({"a":1})
        );
        assert_eq!(
            body(b"not json", false, Some("application/json")),
            json!("not json")
        );
        let s = "ab\u{e9}".as_bytes();
        assert_eq!(body(&s[..3], true, Some("text/plain")), json!("ab"));
        let v = body(&[0xff, 0x00, 0xfe], false, Some("image/png"));
        assert_eq!(
            v,
            json!({"contentType": "image/png", "bytes": 3, "base64": "/wD+"})
        );
        let mut with_secret = vec![0xff, 0x00];
        with_secret.extend_from_slice(b"sk_live_abcdef");
        let v = shown_body(
            &with_secret,
            false,
            Some("application/octet-stream"),
            1000,
            &Secrets::new(["sk_live_abcdef"]).unwrap(),
        );
        assert!(
            v.get("base64").is_none() && v["note"].as_str().unwrap().contains("credential"),
            "{v}"
        );
        let big = vec![0xffu8; 20_000];
        let v = body(&big, false, None);
        assert_eq!(v["bytes"], 20_000);
        assert!(v.get("base64").is_none());
        let v = body(&big, true, None);
        assert!(v["note"].as_str().unwrap().contains("budget"), "{v}");
    }

    #[test]
    fn binary_under_a_text_type_is_reported_not_escaped() {
        let png: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        for ct in [Some("text/plain"), Some("application/json"), None] {
            let v = body(&png, false, ct);
            assert_eq!(v["bytes"], 3000, "{ct:?}: {v}");
            assert_eq!(v["base64"].as_str().unwrap().len(), 4000);
            // Cut short, it is described, not shown.
            let v = body(&png[..1000], true, ct);
            assert_eq!(v["bytes"], 1000, "{ct:?}: {v}");
            assert!(v.get("base64").is_none());
        }
        // Valid UTF-8 full of control characters is not text either.
        let v = body(&[0u8; 500], false, Some("text/plain; charset=utf-8"));
        assert_eq!(v["bytes"], 500, "{v}");
        // base64 only within the response budget.
        let v = shown_body(&png, false, Some("image/png"), 1000, &Secrets::default());
        assert!(v.get("base64").is_none() && v["note"].is_string(), "{v}");
        // Tabs, newlines and ANSI colours are still text.
        assert_eq!(
            body(b"a\tb\r\n\x1b[31mred\x1b[0m\x0c", false, Some("text/plain")),
            json!("a\tb\r\n\u{1b}[31mred\u{1b}[0m\u{c}")
        );
    }

    /// Every cut of a body that echoes a credential, in JSON and as text, at every length:
    /// no piece of six characters or more of any form is left.
    #[test]
    fn no_cut_leaves_part_of_a_credential() {
        let token = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
        let secrets = Secrets::new([format!("Bearer {token}"), token.to_string()]).unwrap();
        let forms = secrets.forms().to_vec();
        let check = |shown: &Value, what: &str| {
            let text = shown.to_string();
            for f in &forms {
                for w in f.as_bytes().windows(6) {
                    let w = std::str::from_utf8(w).unwrap();
                    assert!(!text.contains(w), "{what}: {w:?} of {f:?} in {text}");
                }
            }
        };
        let escaped = token.replace('_', "\\u005f");
        let docs = [
            json!({"pad": "x", "headers": {"authorization": format!("Bearer {token}")}})
                .to_string(),
            format!("{{\"pad\":\"x\",\"auth\":\"Bearer {escaped}\",\"n\":1}}"),
            format!("{{\"link\":\"https://a/?t=Bearer%20{token}\",\"n\":[1,2]}}"),
        ];
        for (i, doc) in docs.iter().enumerate() {
            for len in 1..doc.len() {
                let cut = &doc.as_bytes()[..len];
                let v = shown_body(cut, true, Some("application/json"), len, &secrets);
                check(&v, &format!("json cut at {len}"));
                // As text, JSON escapes are not decoded: only the literal forms count.
                if i != 1 {
                    let v = shown_body(cut, true, Some("text/plain"), len, &secrets);
                    check(&v, &format!("text cut at {len}"));
                }
            }
            let v = shown_body(doc.as_bytes(), false, None, 1 << 20, &secrets);
            check(&v, "whole");
        }
    }

    #[test]
    fn a_cut_string_keeps_what_is_not_a_credential() {
        let secrets = Secrets::new(["Bearer sk_live_0123456789"]).unwrap();
        let doc = r#"{"a":"h\u00e9llo \ud83d\ude00 Bearer sk_live_0123"#;
        let v = cut_json(doc.as_bytes(), doc.len() + 2, &secrets).unwrap();
        assert_eq!(v, json!({"a": "h\u{e9}llo \u{1f600} "}));
    }

    #[test]
    fn a_parse_takes_at_most_its_room() {
        let items = format!("[{}]", vec![r#"{"i":1}"#; 1000].join(","));
        let (v, cost) = parse_within(items.as_bytes(), usize::MAX).unwrap().unwrap();
        assert_eq!(v.as_array().unwrap().len(), 1000);
        assert!(cost > 1000 * 2 * VALUE_BYTES, "{cost}");
        assert!(parse_within(items.as_bytes(), cost - 1).unwrap().is_none());
        assert_eq!(parse_within(items.as_bytes(), cost).unwrap().unwrap().0, v);
        assert!(parse_within(b"[1,", 1000).is_err());
        // Over its room, a body is cut to the shown budget, and says so.
        let mut parse = ParseRoom::new(10_000);
        let (v, _) = shown_body_transcoded(
            items.as_bytes(),
            false,
            Some("application/json"),
            200,
            &Secrets::default(),
            &mut parse,
        );
        assert!(parse.over, "{v}");
        let shown = v.as_array().unwrap();
        assert!(!shown.is_empty() && v.to_string().len() <= 200, "{v}");
    }

    #[test]
    fn a_selected_answer_keeps_the_headers_an_agent_acts_on() {
        let mut h = http::HeaderMap::new();
        for (name, value) in [
            ("content-type", "application/json; charset=utf-8"),
            ("content-length", "6383"),
            ("cache-control", "private, max-age=60"),
            ("etag", "W/\"8b7f\""),
            ("link", "</r?page=2>; rel=\"next\""),
            ("location", "/v1/y"),
            ("retry-after", "30"),
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "4957"),
            ("x-ratelimit-reset", "1772467200"),
            ("x-ratelimit-used", "43"),
            ("x-ratelimit-resource", "core"),
            ("x-rate-limit-remaining", "9"),
            ("ratelimit-reset", "12"),
            ("ratelimit", "limit=100, remaining=50, reset=5"),
            ("ratelimit-policy", "100;w=60"),
            ("x-github-request-id", "C6A2:3F1B2"),
            ("request-id", "req_1"),
        ] {
            h.insert(http::HeaderName::from_static(name), value.parse().unwrap());
        }
        let url = Url::parse("https://api.example/v1/x").unwrap();
        let mut r = UpstreamResponse {
            status: 200,
            ok: true,
            headers: safe_headers(&h, &url),
            body: json!([1]),
            truncated: false,
            duration_ms: Some(7),
            binary: None,
        };
        assert_eq!(r.headers.len(), 18, "{:?}", r.headers);
        r.keep_acted_on();
        let mut kept: Vec<&str> = r.headers.keys().map(String::as_str).collect();
        kept.sort_unstable();
        assert_eq!(
            kept,
            [
                "content-type",
                "link",
                "location",
                "ratelimit",
                "ratelimit-reset",
                "retry-after",
                "x-rate-limit-remaining",
                "x-ratelimit-remaining",
                "x-ratelimit-reset"
            ]
        );
        let shown = serde_json::to_value(&r).unwrap();
        assert!(shown.get("durationMs").is_none(), "{shown}");
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
