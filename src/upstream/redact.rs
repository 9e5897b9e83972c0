//! The configured credentials in every form an upstream might echo them back in, and scrubbing
//! them from what the agent sees.
//!
//! A credential is a configured header value, the token after its scheme (`Bearer …`), the
//! `user:password` of a Basic credential (from `--upstream http://user:password@…` or an
//! `Authorization: Basic …` header) and its password. Each is also looked for percent-encoded
//! (upper- and lower-case hex, RFC 3986 or form style), and base64- and base64url-encoded,
//! whole or inside a longer base64 text at any of the three alignments (an echo of the whole
//! request encoded as base64). Backslashes never count: a form is
//! looked for in the text with every `\` taken out, so an echo escaped once (`\/`, `\"`) or
//! nested in JSON strings any number of times (`\\\/`) is found as well.
//! [`Secrets::scrub`] replaces every occurrence, overlapping ones included, by `[redacted]`;
//! [`Secrets::trim_partial_tail`] drops the beginning of a credential from the end of a text
//! that was cut, so a cut can never leave `Bearer sk_live_…` minus its last characters.

use std::borrow::Cow;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use http::HeaderValue;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use url::Url;

/// What a credential is replaced with.
pub(crate) const REDACTED: &str = "[redacted]";

/// Credentials shorter than this are not scrubbed: redacting them would mangle ordinary text.
pub(crate) const MIN_SECRET_CHARS: usize = 8;

/// A form shorter than this once its backslashes are out (a credential made mostly of them)
/// is not looked for.
const MIN_FORM_BYTES: usize = 4;

/// RFC 3986 `unreserved` stays as it is; everything else is percent-encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why the credential matcher could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the credential matcher for response redaction: {0}")]
pub struct SecretsError(#[from] aho_corasick::BuildError);

/// The configured credentials, in every form that is scrubbed from responses.
#[derive(Clone, Default)]
pub struct Secrets {
    /// Every form without its backslashes, longest first.
    forms: Vec<String>,
    /// All of `forms`, reporting overlapping matches; `None` when there are none.
    matcher: Option<AhoCorasick>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} forms)", self.forms.len())
    }
}

/// `text` without backslashes, and (when there were any) the index in `text` of each byte
/// kept.
fn project(text: &[u8]) -> (Cow<'_, [u8]>, Option<Vec<usize>>) {
    if !text.contains(&b'\\') {
        return (Cow::Borrowed(text), None);
    }
    let (kept, at): (Vec<u8>, Vec<usize>) = text
        .iter()
        .enumerate()
        .filter(|(_, b)| **b != b'\\')
        .map(|(i, b)| (*b, i))
        .unzip();
    (Cow::Owned(kept), Some(at))
}

/// `start` moved back over the backslashes right before it (an escape of the first byte).
fn with_escapes(text: &[u8], mut start: usize) -> usize {
    while start > 0 && text[start - 1] == b'\\' {
        start -= 1;
    }
    start
}

impl Secrets {
    /// The secrets for these credentials (each trimmed; shorter than [`MIN_SECRET_CHARS`]
    /// ignored), expanded into their encoded forms.
    pub fn new<I, S>(credentials: I) -> Result<Secrets, SecretsError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Secrets::from_forms(Vec::new(), credentials)
    }

    /// These secrets and those of `credentials` (one call's own credentials on top of the
    /// configured ones).
    pub fn with<I, S>(&self, credentials: I) -> Result<Secrets, SecretsError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Secrets::from_forms(self.forms.clone(), credentials)
    }

    fn from_forms<I, S>(mut forms: Vec<String>, credentials: I) -> Result<Secrets, SecretsError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for c in credentials {
            let c = c.as_ref().trim();
            if c.len() >= MIN_SECRET_CHARS {
                forms.extend(encoded_forms(c).into_iter().map(|f| f.replace('\\', "")));
            }
        }
        forms.retain(|f| f.len() >= MIN_FORM_BYTES);
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        let matcher = if forms.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&forms)?,
            )
        };
        Ok(Secrets { forms, matcher })
    }

    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Every form that is scrubbed (without backslashes), longest first.
    pub fn forms(&self) -> &[String] {
        &self.forms
    }

    /// Whether `text`, percent-decoded (`+` as a space too, as a query is), holds a form of a
    /// credential that `text` itself does not show.
    pub(crate) fn holds_decoded(&self, text: &str) -> bool {
        if self.is_empty() || !text.contains('%') && !text.contains('+') {
            return false;
        }
        let decoded: Vec<u8> = percent_encoding::percent_decode(text.as_bytes()).collect();
        let plus: Vec<u8> = decoded
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        self.holds(&decoded) || self.holds(&plus)
    }

    /// Whether `bytes` hold any form of a credential.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        self.matcher
            .as_ref()
            .is_some_and(|m| m.is_match(&*project(bytes).0))
    }

    /// Where forms occur in `bytes`, with the backslashes inside and right before each,
    /// overlapping occurrences merged, in order.
    fn spans(&self, bytes: &[u8]) -> Vec<(usize, usize)> {
        let Some(matcher) = &self.matcher else {
            return Vec::new();
        };
        let (projected, at) = project(bytes);
        let mut spans: Vec<(usize, usize)> = matcher
            .find_overlapping_iter(&*projected)
            .map(|m| match &at {
                None => (m.start(), m.end()),
                Some(at) => (with_escapes(bytes, at[m.start()]), at[m.end() - 1] + 1),
            })
            .collect();
        // Overlapping matches come ordered by their end: sort by start, then merge every span
        // that overlaps the one before it.
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (start, end) in spans {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        merged
    }

    /// `bytes` with every occurrence of every form replaced by `[redacted]`; occurrences that
    /// overlap are replaced together, so no piece of either is left.
    pub fn scrub<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let spans = self.spans(bytes);
        if spans.is_empty() {
            return Cow::Borrowed(bytes);
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut at = 0;
        for (start, end) in spans {
            out.extend_from_slice(&bytes[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
        }
        out.extend_from_slice(&bytes[at..]);
        Cow::Owned(out)
    }

    /// [`Secrets::scrub`] for text.
    pub(crate) fn scrub_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.scrub(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Whole forms (valid UTF-8) and backslashes replaced by ASCII: still UTF-8.
            Cow::Owned(bytes) => Cow::Owned(
                String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    /// How many bytes at the end of `text` are the beginning of a form (backslashes not
    /// counting; 0 if none): what is left of a credential that a cut went through.
    pub(crate) fn partial_tail_len(&self, text: &[u8]) -> usize {
        let Some(longest) = self.forms.first().map(String::len) else {
            return 0;
        };
        // The end of `text` that holds `longest` bytes other than backslashes.
        let (mut from, mut kept) = (text.len(), 0);
        while from > 0 && kept < longest {
            from -= 1;
            if text[from] != b'\\' {
                kept += 1;
            }
        }
        let (tail, at) = project(&text[from..]);
        let k = self
            .forms
            .iter()
            .filter_map(|f| {
                let f = f.as_bytes();
                (1..=f.len().min(tail.len()))
                    .rev()
                    .find(|&k| tail.ends_with(&f[..k]))
            })
            .max()
            .unwrap_or(0);
        if k == 0 {
            return 0;
        }
        let first = tail.len() - k;
        let start = from + at.map_or(first, |at| at[first]);
        text.len() - with_escapes(text, start)
    }

    /// How many bytes to drop from the end of a cut text so it does not end with the
    /// beginning of a credential: [`Secrets::partial_tail_len`], again while what was dropped
    /// is at least [`MIN_FORM_BYTES`] long (a shorter piece ends it: a text of repeated
    /// characters, `aaaa…` when a credential starts with `a`, is not eaten whole).
    pub(crate) fn cut_tail_len(&self, text: &[u8]) -> usize {
        let mut keep = text.len();
        loop {
            let k = self.partial_tail_len(&text[..keep]);
            keep -= k;
            if k < MIN_FORM_BYTES {
                return text.len() - keep;
            }
        }
    }

    /// Drops the end of a cut text while it is the beginning of a credential (any length: a
    /// few characters more or less at a cut change nothing for the reader). Once what was
    /// dropped is shorter than [`MIN_FORM_BYTES`] it stops: a text of repeated characters
    /// (`aaaa…`, when a credential starts with `a`) is not eaten whole.
    pub(crate) fn trim_partial_tail(&self, text: &mut String) {
        loop {
            let k = self.partial_tail_len(text.as_bytes());
            let keep = text.len() - k;
            // The end matched a form's beginning, which starts a character, or a backslash.
            if k == 0 || !text.is_char_boundary(keep) {
                return;
            }
            text.truncate(keep);
            if k < MIN_FORM_BYTES {
                return;
            }
        }
    }

    /// Scrubs every string and every object key in `v`.
    pub(crate) fn redact_value(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.scrub_str(s) {
                    *s = clean;
                }
                // A form percent-encoded some other way (`%51` for `Q`, `/` left as is) is
                // the credential again once decoded, as a next-page link is: the whole
                // string goes.
                if self.holds_decoded(s) {
                    *s = REDACTED.to_string();
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.redact_value(i)),
            Value::Object(map) => {
                if map.keys().any(|k| self.holds(k.as_bytes())) {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, v)| (self.scrub_str(&k).into_owned(), v))
                        .collect();
                }
                map.values_mut().for_each(|c| self.redact_value(c));
            }
            _ => {}
        }
    }
}

/// `secret` as it may appear in an echo: as is, percent-encoded (every non-alphanumeric,
/// RFC 3986 component, form style; upper- and lower-case hex), and base64-encoded
/// ([`base64_forms`]). JSON escapes need no form of their own: backslashes never count.
fn encoded_forms(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_string()];
    for encoded in [
        utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string(),
        utf8_percent_encode(secret, COMPONENT).to_string(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
    ] {
        out.push(lower_hex(&encoded));
        out.push(encoded);
    }
    out.extend(base64_forms(secret.as_bytes()));
    out
}

/// Shortest base64 form looked for: shorter runs of base64 characters are too common.
const MIN_BASE64_FORM: usize = 8;

/// `secret` in base64 and base64url: whole (with and without padding), and as it shows inside
/// a longer base64 text. There its encoding depends on where it starts (the offset modulo 3
/// of its first byte): for each of the three offsets, the characters that depend only on the
/// secret's bytes, that is the 4-character groups holding three of its bytes (the group it
/// starts in, shared with what comes before, and the partial group at its end, shared with
/// what follows, are left out). A match leaves at most 4 characters of the encoded secret
/// on either side, never enough to recover it.
fn base64_forms(secret: &[u8]) -> Vec<String> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
    let mut standard = vec![STANDARD.encode(secret), STANDARD_NO_PAD.encode(secret)];
    for offset in 0..3 {
        let mut shifted = vec![0u8; offset];
        shifted.extend_from_slice(secret);
        let whole = shifted.len() / 3 * 3;
        let encoded = STANDARD_NO_PAD.encode(&shifted[..whole]);
        let skip = if offset == 0 { 0 } else { 4 };
        if let Some(middle) = encoded.get(skip..) {
            standard.push(middle.to_string());
        }
    }
    standard.retain(|f| f.len() >= MIN_BASE64_FORM);
    let url_safe: Vec<String> = standard
        .iter()
        .map(|f| f.replace('+', "-").replace('/', "_"))
        .collect();
    standard.extend(url_safe);
    standard
}

/// A percent-encoded text with lower-case hex digits.
fn lower_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut hex_left = 0;
    for c in encoded.chars() {
        if hex_left > 0 {
            out.push(c.to_ascii_lowercase());
            hex_left -= 1;
        } else {
            if c == '%' {
                hex_left = 2;
            }
            out.push(c);
        }
    }
    out
}

/// A URL as it may be shown: user name and password removed.
pub(crate) fn redact_url(url: &Url) -> String {
    let mut shown = url.clone();
    if !shown.username().is_empty() || shown.password().is_some() {
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
    }
    shown.to_string()
}

/// A configured URL for an error message: no user info, no query, no fragment (either may
/// hold a credential), even when it does not parse.
pub(crate) fn redact_str(s: &str) -> String {
    let s = s.trim();
    let s = s.split(['?', '#']).next().unwrap_or_default();
    if let Ok(u) = Url::parse(s)
        && u.has_host()
    {
        return redact_url(&u);
    }
    // Unparsable, or no host (`user:password@host` reads as scheme `user`): drop everything
    // between `scheme://` and the last `@` of the authority.
    let (scheme, rest) = match s.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, s),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{rest}"),
        // No scheme: the text before an `@` may still be `user:password`.
        None => rest.to_string(),
    }
}

/// The texts an upstream might echo back for these credential headers: each value, the token
/// after its scheme (`Bearer …`), and the `user:password` and password inside a Basic value.
pub(crate) fn credential_texts<'a>(
    values: impl IntoIterator<Item = &'a HeaderValue>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if let Ok(s) = v.to_str() {
            value_texts(s, &mut out);
        }
    }
    out
}

/// [`credential_texts`] of one header value.
pub(crate) fn value_texts(value: &str, out: &mut Vec<String>) {
    use base64::Engine as _;
    let s = value.trim();
    out.push(s.to_string());
    if let Some((scheme, token)) = s.split_once(' ') {
        let token = token.trim();
        out.push(token.to_string());
        if scheme.eq_ignore_ascii_case("basic")
            && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(token)
            && let Ok(text) = String::from_utf8(bytes)
        {
            basic(text, out);
        }
    }
}

/// A Basic credential's `user:password` and its password.
pub(crate) fn basic(user_pass: String, out: &mut Vec<String>) {
    if let Some((_, password)) = user_pass.split_once(':') {
        out.push(password.to_string());
    }
    out.push(user_pass);
}

/// Asserts that `secrets` redacts each of `forms` (unit tests of the modules that build them).
#[cfg(test)]
pub(crate) fn assert_forms(secrets: &Secrets, forms: &[&str]) {
    for form in forms {
        assert!(
            secrets.forms().iter().any(|f| f == form),
            "{form}: {:?}",
            secrets.forms()
        );
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_form_encoded_another_way_is_found_decoded() {
        let s = Secrets::new(["QSECRET456xyzuvw", "Qk+ey/SECRET=99zz"]).expect("secrets");
        assert!(s.holds_decoded("cursor=%51SECRET456xyzuvw"));
        assert!(s.holds_decoded("%51%53%45%43%52%45%54456xyzuvw"));
        assert!(s.holds_decoded("Qk%2Bey/SECRET%3D99zz"));
        assert!(!s.holds_decoded("page%202"));
        let mut v =
            serde_json::json!({"next": "https://x/y?c=%51SECRET456xyzuvw", "ok": "page%202"});
        s.redact_value(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"next": "[redacted]", "ok": "page%202"})
        );
    }

    use super::*;
    use serde_json::json;

    fn secrets(list: &[&str]) -> Secrets {
        Secrets::new(list).unwrap()
    }

    #[test]
    fn every_encoding_is_a_form() {
        let s = secrets(&["p@ss/w0rd+ x"]);
        assert_forms(
            &s,
            &[
                "p@ss/w0rd+ x",
                "p%40ss%2Fw0rd%2B%20x",
                "p%40ss%2fw0rd%2b%20x",
                "p%40ss%2Fw0rd%2B+x",
            ],
        );
        assert!(secrets(&["short"]).is_empty());
    }

    #[test]
    fn escaped_and_nested_echoes_are_found() {
        let s = secrets(&["p@ss/w0rd\"q"]);
        for echo in [
            // Escaped once (JSON, PHP's `\/`), nested in a JSON string twice.
            r#"{"a":"p@ss/w0rd\"q"}"#,
            r#"{"a":"p@ss\/w0rd\"q"}"#,
            r#"{"a":"{\"b\":\"p@ss\\\/w0rd\\\"q\"}"}"#,
        ] {
            let clean = s.scrub(echo.as_bytes());
            let clean = std::str::from_utf8(&clean).unwrap();
            assert!(!clean.contains("w0rd"), "{echo}: {clean}");
            // Still JSON: the escapes went with the credential.
            serde_json::from_str::<Value>(clean).unwrap_or_else(|e| panic!("{clean}: {e}"));
        }
        // An escape of the credential's first character goes with it.
        let s = secrets(&["\"abcdefgh"]);
        assert_eq!(
            &*s.scrub(br#"{"a":"\"abcdefgh"}"#),
            br#"{"a":"[redacted]"}"#
        );
    }

    #[test]
    fn scrub_replaces_overlapping_occurrences_together() {
        let s = secrets(&["abcdefgh12", "gh12345678"]);
        assert_eq!(
            &*s.scrub(b"x abcdefgh12345678 y gh12345678"),
            b"x [redacted] y [redacted]"
        );
        assert!(matches!(s.scrub(b"nothing here"), Cow::Borrowed(_)));
        assert!(s.holds(b"..gh12345678"));
        assert!(s.holds(b"..gh1234\\5678"));
    }

    #[test]
    fn a_cut_credential_is_dropped_from_the_end() {
        let s = secrets(&["Bearer sk_live_0123456789"]);
        for (text, trimmed) in [
            ("token: Bearer sk_live_012345678", "token: "),
            ("ends with B", "ends with "),
            ("nothing to drop", "nothing to drop"),
            // Repeated characters that begin a credential are not all eaten.
            ("x BBBBBBBB", "x BBBBBBB"),
        ] {
            let mut t = text.to_string();
            s.trim_partial_tail(&mut t);
            assert_eq!(t, trimmed, "{text}");
        }
        // A whole credential is not a cut one; `scrub` replaces it.
        assert_eq!(s.partial_tail_len(b"x Bearer sk_live_0123456789"), 25);
        // Escaped, with the escapes before it and an escape cut in two.
        let s = secrets(&["A/CAAW51xyz"]);
        let mut t = r#"x \\\A\\\/CAAW\"#.to_string();
        s.trim_partial_tail(&mut t);
        assert_eq!(t, "x ");
    }

    #[test]
    fn values_and_keys_are_scrubbed() {
        let s = secrets(&["Bearer sk_test_123", "sk_test_123"]);
        let mut v = json!({"headers": {"Authorization": "Bearer sk_test_123"},
            "msg": ["bad key sk_test_123!"], "sk_test_123": 1, "n": 5});
        s.redact_value(&mut v);
        assert_eq!(
            v,
            json!({"headers": {"Authorization": "[redacted]"},
            "msg": ["bad key [redacted]!"], "[redacted]": 1, "n": 5})
        );
    }
}
