//! Turning the bytes an upstream sent into the bytes the agent's view is made of, before any
//! credential is scrubbed: the response's `Content-Encoding` undone (gzip, deflate as zlib or
//! raw, br, zstd; stacked ones in reverse order, at most [`MAX_LAYERS`]), and UTF-16/UTF-32
//! text transcoded to UTF-8 (by its byte-order mark, or by a `charset` parameter alone).
//!
//! The HTTP client never decompresses: apigate does it here so the decompressed size counts
//! against the response budget. The encoded bytes (themselves read up to the budget) are
//! decoded through readers stacked on them, and the result is read up to budget + 1 bytes and
//! no more: a compression bomb is cut (`truncated`), never expanded in memory. An encoding
//! this module does not know, or a stream that does not decode, is a [`DecodeError`]: the
//! caller describes such a body and never shows its raw bytes.

use std::io::{self, Read};

/// The most `Content-Encoding` layers undone (`gzip, gzip` is two).
pub(crate) const MAX_LAYERS: usize = 3;

/// zstd's largest back-reference window accepted, as a power of two: 8 MiB, the limit HTTP's
/// zstd content coding sets (RFC 9659), so a crafted frame cannot make the decoder allocate
/// more.
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// Why a body's content encoding could not be undone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error(
        "its content encoding `{0}` is not one apigate decodes (gzip, deflate, br, zstd, identity)"
    )]
    Unknown(String),
    #[error("it has more than {MAX_LAYERS} content encodings")]
    TooManyLayers,
    #[error("its {encoding} content encoding is broken ({message})")]
    Corrupt { encoding: String, message: String },
}

/// A body with its content encoding undone.
#[derive(Debug)]
pub struct Decoded {
    /// At most the budget.
    pub bytes: Vec<u8>,
    /// Decoding stopped at the budget, or the encoded bytes were themselves cut.
    pub truncated: bool,
    /// A content encoding was undone.
    pub decoded: bool,
}

/// The codings of a `Content-Encoding` value, lower-case, in the order they were applied,
/// `identity` left out.
fn codings(content_encoding: &str) -> Vec<String> {
    content_encoding
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect()
}

/// A zlib stream starts with a compression-method byte (8, deflate) whose 16-bit header is a
/// multiple of 31; HTTP's `deflate` is meant to be zlib, but some servers send raw deflate.
fn is_zlib(head: &[u8]) -> bool {
    matches!(head, [cmf, flg, ..] if cmf & 0x0F == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0)
}

/// A reader of `coding`'s decoded stream from `inner`.
fn decoder<'a>(coding: &str, inner: Box<dyn Read + 'a>) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match coding {
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(inner)),
        "deflate" => {
            let mut inner = io::BufReader::new(inner);
            let head = io::BufRead::fill_buf(&mut inner)?;
            if is_zlib(head) {
                Box::new(flate2::bufread::ZlibDecoder::new(inner))
            } else {
                Box::new(flate2::bufread::DeflateDecoder::new(inner))
            }
        }
        "br" => Box::new(brotli_decompressor::Decompressor::new(inner, 8 * 1024)),
        "zstd" => {
            let mut d = zstd::stream::read::Decoder::new(inner)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(d)
        }
        _ => unreachable!("codings are checked before"),
    })
}

/// `raw` (the first bytes of the body; `raw_truncated` when the upstream sent more) with the
/// codings of `content_encoding` undone, read up to `budget` bytes.
pub(crate) fn decode_content(
    raw: Vec<u8>,
    raw_truncated: bool,
    content_encoding: Option<&str>,
    budget: usize,
) -> Result<Decoded, DecodeError> {
    let codings = codings(content_encoding.unwrap_or_default());
    if codings.is_empty() {
        return Ok(Decoded {
            bytes: raw,
            truncated: raw_truncated,
            decoded: false,
        });
    }
    if codings.len() > MAX_LAYERS {
        return Err(DecodeError::TooManyLayers);
    }
    if let Some(c) = codings
        .iter()
        .find(|c| !matches!(c.as_str(), "gzip" | "x-gzip" | "deflate" | "br" | "zstd"))
    {
        return Err(DecodeError::Unknown(c.chars().take(40).collect()));
    }
    let corrupt = |coding: &str, e: io::Error| DecodeError::Corrupt {
        encoding: coding.to_string(),
        message: e.kind().to_string(),
    };
    // The last coding applied is the first undone.
    let mut reader: Box<dyn Read + '_> = Box::new(&raw[..]);
    for c in codings.iter().rev() {
        reader = decoder(c, reader).map_err(|e| corrupt(c, e))?;
    }
    let mut out = Vec::with_capacity(budget.min(64 * 1024));
    let mut limited = reader.take(budget as u64 + 1);
    let mut buf = [0u8; 8 * 1024];
    loop {
        match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => extend_within(&mut out, &buf[..n], budget + 1),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The encoded bytes were cut at the budget: their decoded beginning is the body.
            Err(_) if raw_truncated => {
                out.truncate(budget);
                return Ok(Decoded {
                    bytes: out,
                    truncated: true,
                    decoded: true,
                });
            }
            Err(e) => return Err(corrupt(&codings.join(", "), e)),
        }
    }
    let cut = out.len() > budget;
    out.truncate(budget);
    Ok(Decoded {
        bytes: out,
        truncated: cut || raw_truncated,
        decoded: true,
    })
}

/// Appends `bytes` to `buf`, growing it by doubling but never past `most` bytes of capacity:
/// a body read up to a budget takes the budget, not twice it (`Vec`'s own doubling would
/// reserve 32 MiB for 16 MiB and one byte).
pub(super) fn extend_within(buf: &mut Vec<u8>, bytes: &[u8], most: usize) {
    let need = buf.len() + bytes.len();
    if need > buf.capacity() {
        let want = buf
            .capacity()
            .saturating_mul(2)
            .max(need)
            .min(most.max(need));
        buf.reserve_exact(want - buf.len());
    }
    buf.extend_from_slice(bytes);
}

/// How UTF-16/32 text is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Utf {
    U16 { le: bool },
    U32 { le: bool },
}

/// The `charset` parameter of a (lower-case) content type, without quotes.
fn charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim() == "charset").then(|| v.trim().trim_matches('"'))
    })
}

/// The byte-order mark at the start of `bytes`: the layout and the mark's length (UTF-32LE's
/// mark starts like UTF-16LE's, so it is looked for first).
fn bom(bytes: &[u8]) -> Option<(Utf, usize)> {
    match bytes {
        [0xFF, 0xFE, 0, 0, ..] => Some((Utf::U32 { le: true }, 4)),
        [0, 0, 0xFE, 0xFF, ..] => Some((Utf::U32 { le: false }, 4)),
        [0xFF, 0xFE, ..] => Some((Utf::U16 { le: true }, 2)),
        [0xFE, 0xFF, ..] => Some((Utf::U16 { le: false }, 2)),
        _ => None,
    }
}

/// The byte order of UTF-16/32 text that does not say: mostly-ASCII text has its zero bytes
/// after (little-endian) or before (big-endian) each character's low byte.
fn guess_le(bytes: &[u8], width: usize) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let zeros_at = |offset: usize| {
        head.chunks_exact(width)
            .filter(|unit| unit[offset] == 0)
            .count()
    };
    zeros_at(width - 1) >= zeros_at(0)
}

/// `bytes` as UTF-8 when they are UTF-16 or UTF-32 text: by a byte-order mark (then the text
/// must decode, apart from a unit cut off at the end of a `truncated` body; anything else is
/// not text), or by a `charset` of `content_type` (lower-case) alone (then whatever does not
/// decode becomes U+FFFD). A UTF-8 byte-order mark is dropped. `None` when nothing changes.
pub(crate) fn to_utf8(bytes: &[u8], truncated: bool, content_type: &str) -> Option<Vec<u8>> {
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        return Some(rest.to_vec());
    }
    let declared = charset(content_type).and_then(|c| match c {
        "utf-16le" => Some(Utf::U16 { le: true }),
        "utf-16be" => Some(Utf::U16 { le: false }),
        "utf-16" | "ucs-2" => Some(Utf::U16 {
            le: guess_le(bytes, 2),
        }),
        "utf-32le" => Some(Utf::U32 { le: true }),
        "utf-32be" => Some(Utf::U32 { le: false }),
        "utf-32" => Some(Utf::U32 {
            le: guess_le(bytes, 4),
        }),
        _ => None,
    });
    let (utf, skip, strict) = match (bom(bytes), declared) {
        (Some((utf, len)), Some(_)) => (utf, len, false),
        (Some((utf, len)), None) => (utf, len, true),
        (None, Some(utf)) => (utf, 0, false),
        (None, None) => return None,
    };
    let body = &bytes[skip..];
    let mut out = String::with_capacity(body.len());
    match utf {
        Utf::U16 { le } => {
            let whole = body.len() / 2 * 2;
            if whole != body.len() && !truncated && strict {
                return None;
            }
            let units = body[..whole].chunks_exact(2).map(|u| {
                let u = [u[0], u[1]];
                if le {
                    u16::from_le_bytes(u)
                } else {
                    u16::from_be_bytes(u)
                }
            });
            let chars: Vec<_> = char::decode_utf16(units).collect();
            let n = chars.len();
            for (i, c) in chars.into_iter().enumerate() {
                match c {
                    Ok(c) => out.push(c),
                    // A surrogate pair cut in two at the end of a cut body.
                    Err(_) if truncated && i + 1 == n => {}
                    Err(_) if strict => return None,
                    Err(_) => out.push(char::REPLACEMENT_CHARACTER),
                }
            }
            if whole != body.len() && !truncated {
                out.push(char::REPLACEMENT_CHARACTER);
            }
        }
        Utf::U32 { le } => {
            let whole = body.len() / 4 * 4;
            if whole != body.len() && !truncated && strict {
                return None;
            }
            for u in body[..whole].chunks_exact(4) {
                let u = [u[0], u[1], u[2], u[3]];
                let code = if le {
                    u32::from_le_bytes(u)
                } else {
                    u32::from_be_bytes(u)
                };
                match char::from_u32(code) {
                    Some(c) => out.push(c),
                    None if strict => return None,
                    None => out.push(char::REPLACEMENT_CHARACTER),
                }
            }
            if whole != body.len() && !truncated {
                out.push(char::REPLACEMENT_CHARACTER);
            }
        }
    }
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_undone_in_reverse_and_bounded() {
        let text = b"hello hello hello".repeat(10);
        let d = decode_content(gzip(&gzip(&text)), false, Some("gzip, GZIP"), 1000).unwrap();
        assert_eq!(
            (d.bytes, d.truncated, d.decoded),
            (text.clone(), false, true)
        );
        let d = decode_content(text.clone(), false, Some(" identity "), 1000).unwrap();
        assert!(!d.decoded);
        // Cut at the budget, flagged.
        let d = decode_content(gzip(&text), false, Some("gzip"), 100).unwrap();
        assert_eq!((d.bytes.len(), d.truncated), (100, true));
        assert_eq!(
            decode_content(text.clone(), false, Some("compress"), 100).unwrap_err(),
            DecodeError::Unknown("compress".into())
        );
        assert_eq!(
            decode_content(text.clone(), false, Some("gzip,gzip,gzip,gzip"), 100).unwrap_err(),
            DecodeError::TooManyLayers
        );
        assert!(matches!(
            decode_content(text.clone(), false, Some("gzip"), 100),
            Err(DecodeError::Corrupt { .. })
        ));
        // The encoded bytes cut at the budget: what decodes is kept, flagged.
        let z = gzip(&text);
        let d = decode_content(z[..z.len() - 12].to_vec(), true, Some("gzip"), 1000).unwrap();
        assert!(d.truncated && text.starts_with(&d.bytes), "{d:?}");
    }

    #[test]
    fn utf16_and_utf32_become_utf8() {
        let s = "h\u{e9}llo \u{1f600}";
        let le: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let be: Vec<u8> = s.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let with_bom = |bom: &[u8], b: &[u8]| [bom, b].concat();
        let want = Some(s.as_bytes().to_vec());
        assert_eq!(to_utf8(&with_bom(&[0xFF, 0xFE], &le), false, ""), want);
        assert_eq!(to_utf8(&with_bom(&[0xFE, 0xFF], &be), false, ""), want);
        assert_eq!(to_utf8(&le, false, "text/plain; charset=utf-16le"), want);
        assert_eq!(
            to_utf8(&be, false, "text/plain; charset=\"utf-16be\""),
            want
        );
        assert_eq!(to_utf8(&le, false, "text/plain; charset=utf-16"), want);
        let le32: Vec<u8> = s.chars().flat_map(|c| u32::from(c).to_le_bytes()).collect();
        assert_eq!(
            to_utf8(&with_bom(&[0xFF, 0xFE, 0, 0], &le32), false, ""),
            want
        );
        // A cut body loses its last partial character.
        let cut = with_bom(&[0xFF, 0xFE], &le[..le.len() - 1]);
        assert_eq!(
            to_utf8(&cut, true, ""),
            Some("h\u{e9}llo ".as_bytes().to_vec())
        );
        // Binary that happens to start with a mark is not text.
        assert_eq!(
            to_utf8(&[0xFF, 0xFE, 0x00, 0xD8, 0x41, 0x00], false, ""),
            None
        );
        assert_eq!(to_utf8(b"plain", false, "text/plain"), None);
        assert_eq!(to_utf8(b"\xEF\xBB\xBF{}", false, ""), Some(b"{}".to_vec()));
    }
}
