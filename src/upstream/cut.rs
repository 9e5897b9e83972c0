//! Cutting a JSON document that was itself cut off (read up to a byte budget) to its longest
//! valid prefix, closed: arrays keep their first whole items, objects their first whole
//! members, and a cut string never ends with the beginning of a credential. Pure: no I/O.

use serde_json::Value;

use super::redact::Secrets;

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
/// (for example a cut-off top-level number). A string cut short never ends with the beginning
/// of one of `secrets`.
pub(crate) fn cut_json(bytes: &[u8], limit: usize, secrets: &Secrets) -> Option<Value> {
    // Best cut at a structural boundary, and best cut inside a string value (where its
    // opening quote is, where to cut, what closes it).
    let mut structural: Option<(usize, Vec<u8>)> = None;
    let mut in_string: Option<(usize, usize, Vec<u8>)> = None;
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
                        in_string = Some((i, p, closers(&stack, true)));
                    }
                    break;
                }
                i = j + 1;
                if is_key {
                    continue;
                }
                if let Some(p) = last_safe {
                    in_string = Some((i, p, closers(&stack, true)));
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
    // A cut inside a string moves back past what could be the start of a credential.
    let in_string = in_string
        .and_then(|(start, pos, close)| Some((trim_cut(bytes, start, pos, secrets)?, close)));
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

/// Where to cut the string value whose opening quote is `bytes[start]`, at or before `pos` (a
/// character or escape boundary), so that its decoded text does not end with the beginning
/// of a credential. `None` when the string up to `pos` is not valid JSON.
fn trim_cut(bytes: &[u8], start: usize, pos: usize, secrets: &Secrets) -> Option<usize> {
    if secrets.is_empty() {
        return Some(pos);
    }
    let mut quoted = bytes.get(start..pos)?.to_vec();
    quoted.push(b'"');
    let text: String = serde_json::from_slice(&quoted).ok()?;
    let keep = text.len() - secrets.cut_tail_len(text.as_bytes());
    if keep == text.len() {
        return Some(pos);
    }
    // The raw position after the characters that decode to `text[..keep]`: each escape or
    // UTF-8 sequence is one character, and `keep` is a character boundary.
    let (mut at, mut decoded) = (start + 1, 0);
    while decoded < keep {
        let (raw, len) = json_char(bytes, at)?;
        at += raw;
        decoded += len;
    }
    (decoded == keep).then_some(at)
}

/// The character of a JSON string at `bytes[at]`: (its raw length, its UTF-8 length).
fn json_char(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let hex = |from: usize| -> Option<u32> {
        let digits = std::str::from_utf8(bytes.get(from..from + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    match *bytes.get(at)? {
        b'\\' if bytes.get(at + 1) == Some(&b'u') => {
            let code = hex(at + 2)?;
            if (0xD800..0xDC00).contains(&code) {
                // A surrogate pair: 12 bytes, one 4-byte character.
                let low = (bytes.get(at + 6..at + 8)? == b"\\u").then(|| hex(at + 8))??;
                return (0xDC00..0xE000).contains(&low).then_some((12, 4));
            }
            Some((6, char::from_u32(code)?.len_utf8()))
        }
        b'\\' => Some((2, 1)),
        b if b < 0x80 => Some((1, 1)),
        b if b >> 5 == 0b110 => Some((2, 2)),
        b if b >> 4 == 0b1110 => Some((3, 3)),
        b if b >> 3 == 0b11110 => Some((4, 4)),
        _ => None,
    }
}
