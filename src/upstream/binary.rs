//! Binary responses, read past the text budget: which content types may carry one, and the
//! whole body (up to `--max-read-bytes`, its content encoding undone) handed on with its
//! SHA-256 when it is not text by type and content. An over-long body is described by type
//! and size so far, never handed on in part; one holding a configured credential is described
//! and dropped. What becomes of the bytes (image, held resource, file) is decided in
//! `tools::binary_out`.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::decode;
use super::redact::Secrets;
use super::response::{self, BinaryBody, Received, ShownBody};

impl BinaryBody {
    /// `{contentType, bytes, sha256}`: how the tool result describes the body.
    pub fn describe(&self) -> Value {
        json!({
            "contentType": self.content_type,
            "bytes": self.bytes.len(),
            "sha256": self.sha256,
        })
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether a response of this `Content-Type` may be binary, and so is read up to
/// `--max-read-bytes` rather than the text budget: a type that names neither text, JSON, XML,
/// YAML, a form nor a script. Its content decides afterwards. A response with no type is
/// shown as before (text, JSON, or small binary as base64 within the budget).
pub(crate) fn may_be_binary(content_type: Option<&str>) -> bool {
    let essence = essence(content_type.unwrap_or_default());
    if essence.is_empty() {
        return false;
    }
    let textual = essence.starts_with("text/")
        || [
            "json",
            "xml",
            "yaml",
            "javascript",
            "ecmascript",
            "x-www-form-urlencoded",
        ]
        .iter()
        .any(|t| essence.contains(t));
    !textual
}

/// The media type without parameters, lower-case.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// What was made of a response that [`may_be_binary`]: the body shown, and the bytes when it
/// is binary and complete.
pub(crate) struct Classified {
    pub shown: ShownBody,
    pub binary: Option<BinaryBody>,
}

/// Limits for [`classify`].
pub(crate) struct Limits {
    /// The text budget (`--max-response-bytes`).
    pub text: usize,
    /// The read cap (`--max-read-bytes`).
    pub read: usize,
}

/// The body of a response whose type [`may_be_binary`], from the raw bytes read (at most
/// `limits.read`; `received.truncated` when the upstream sent more). Text content (whatever its
/// type said) is shown as any text answer; binary content is
/// handed on whole, or described when it was over `limits.read` or holds a credential.
pub(crate) fn classify(
    raw: Vec<u8>,
    received: Received<'_>,
    limits: &Limits,
    secrets: &Secrets,
) -> Classified {
    let ct = received.content_type.map(essence).unwrap_or_default();
    let raw_len = raw.len();
    let decoded = decode::decode_content(
        raw,
        received.truncated,
        received.content_encoding,
        limits.read,
    );
    let d = match decoded {
        Ok(d) if !d.bytes.is_empty() && !response::is_text(&d.bytes, d.truncated, &ct) => d,
        // Text, empty, or an encoding that cannot be undone: shown as any text answer is
        // (the response budget cuts it later, after `select`).
        other => {
            return Classified {
                shown: response::shown_decoded(other, raw_len, received, limits.text, secrets),
                binary: None,
            };
        }
    };
    let shown_type = if ct.is_empty() {
        "application/octet-stream".to_string()
    } else {
        ct
    };
    let len = d.bytes.len();
    let described = |note: String, truncated: bool| {
        let mut body = json!({"contentType": shown_type, "bytes": len, "note": note});
        secrets.redact_value(&mut body);
        Classified {
            shown: ShownBody {
                body,
                truncated,
                transformed: d.decoded,
            },
            binary: None,
        }
    };
    if d.truncated {
        return described(
            format!(
                "binary content, more than {len} bytes: over the read limit of {} bytes \
                 (--max-read-bytes); not read further and not shown",
                limits.read
            ),
            true,
        );
    }
    if response::holds_secret(&d.bytes, secrets) {
        return described(
            "binary content holding a configured credential; not shown".into(),
            false,
        );
    }
    let body = BinaryBody {
        sha256: sha256_hex(&d.bytes),
        content_type: shown_type,
        bytes: bytes::Bytes::from(d.bytes),
    };
    let mut shown = body.describe();
    secrets.redact_value(&mut shown);
    Classified {
        shown: ShownBody {
            body: shown,
            truncated: false,
            transformed: d.decoded,
        },
        binary: Some(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_types_are_not_binary() {
        for ct in [
            "application/json",
            "text/plain; charset=utf-8",
            "application/vnd.github+json",
            "application/xml",
            "application/x-www-form-urlencoded",
        ] {
            assert!(!may_be_binary(Some(ct)), "{ct}");
        }
        for ct in [
            "image/png",
            "application/zip",
            "application/octet-stream; x=1",
        ] {
            assert!(may_be_binary(Some(ct)), "{ct}");
        }
        assert!(!may_be_binary(None) && !may_be_binary(Some(" ")));
    }

    fn limits() -> Limits {
        Limits {
            text: 100,
            read: 1000,
        }
    }

    fn labelled(truncated: bool, content_type: &str) -> Received<'_> {
        Received {
            truncated,
            content_type: Some(content_type),
            content_encoding: None,
        }
    }

    #[test]
    fn binary_is_handed_on_whole_text_is_shown_as_text() {
        let bin: Vec<u8> = (0..=255u8).cycle().take(600).collect();
        let c = classify(
            bin.clone(),
            labelled(false, "application/zip"),
            &limits(),
            &Secrets::default(),
        );
        let b = c.binary.expect("binary");
        assert_eq!(&b.bytes[..], &bin[..]);
        assert_eq!(c.shown.body["sha256"], sha256_hex(&bin));
        assert!(!c.shown.truncated);
        // Text labelled as a PNG is text, read like any text answer (the response budget cuts
        // it later, after `select`).
        let text = "hello ".repeat(50).into_bytes();
        let c = classify(
            text,
            labelled(false, "image/png"),
            &limits(),
            &Secrets::default(),
        );
        assert!(c.binary.is_none() && !c.shown.truncated);
        assert_eq!(c.shown.body.as_str(), Some("hello ".repeat(50).as_str()));
    }

    #[test]
    fn over_the_read_limit_or_holding_a_credential_is_described() {
        let bin: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let c = classify(
            bin,
            labelled(true, "application/zip"),
            &limits(),
            &Secrets::default(),
        );
        assert!(c.binary.is_none() && c.shown.truncated);
        assert!(
            c.shown.body["note"]
                .as_str()
                .unwrap()
                .contains("--max-read-bytes")
        );
        assert!(c.shown.body.get("sha256").is_none());
        let mut bin: Vec<u8> = vec![0, 1, 2, 0xff];
        bin.extend_from_slice(b"sk_live_abcdef");
        let secrets = Secrets::new(["sk_live_abcdef"]).unwrap();
        let c = classify(
            bin,
            labelled(false, "application/octet-stream"),
            &limits(),
            &secrets,
        );
        assert!(c.binary.is_none());
        assert!(
            c.shown.body["note"]
                .as_str()
                .unwrap()
                .contains("credential")
        );
    }
}
