//! Bytes an `api_execute` call uploads: a whole binary body (`application/octet-stream`,
//! `application/zip`, `image/png`, …) or the file parts of a `multipart/form-data` body. What
//! makes a media type or a schema binary, which multipart fields take a file part (any string,
//! a schema without a type, a field the `encoding` object types) and as what media type, the
//! checks on a part's filename and media type, and the short description a dry run shows
//! instead of the bytes. Pure functions; the bytes are
//! decoded from base64 or read from the operator's upload folder by `tools::upload`.

use bytes::Bytes;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::spec::{MediaType, Spec};

/// The longest filename or part media type accepted, in bytes.
pub(crate) const MAX_PART_TEXT_BYTES: usize = 255;

/// Decoded bytes for the whole body or one multipart file part.
#[derive(Clone)]
pub struct Upload {
    pub bytes: Bytes,
    /// The part's filename (multipart only; defaults to the field name).
    pub filename: Option<String>,
    /// The part's media type (multipart only; default `application/octet-stream`).
    pub content_type: Option<String>,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Upload({} bytes, {:?})", self.bytes.len(), self.filename)
    }
}

impl Upload {
    /// How a dry run shows it: `{contentType, bytes, sha256}` (the first 16 hex digits of
    /// the digest), plus `filename` for a part. Never the bytes.
    pub fn describe(&self, content_type: &str) -> Value {
        let digest = hex::encode(Sha256::digest(&self.bytes));
        let mut shown = json!({
            "contentType": content_type,
            "bytes": self.bytes.len(),
            "sha256": format!("{}…", &digest[..16]),
        });
        if let Some(f) = &self.filename {
            shown["filename"] = Value::String(f.clone());
        }
        shown
    }
}

/// The bytes a call uploads, decided at the tools edge.
#[derive(Debug, Clone, Default)]
pub enum Uploads {
    /// No bytes: the body (if any) is encoded from its JSON value.
    #[default]
    None,
    /// The whole body is these bytes.
    Body(Upload),
    /// File parts of a `multipart/form-data` body, by field name (a field may repeat).
    Parts(Vec<(String, Upload)>),
}

/// What a request body's media type carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    /// Bytes as they are: `application/octet-stream`, `application/zip`, `image/*`, any type
    /// whose schema is a binary string.
    Binary,
    /// Fields, some of which may be files.
    Multipart,
    /// Text: JSON, `text/*`, XML, `application/x-www-form-urlencoded`. Never bytes.
    Text,
}

/// Media types whose content is bytes whatever their schema says.
const BINARY_TYPES: [&str; 13] = [
    "application/octet-stream",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/x-7z-compressed",
    "application/x-bzip2",
    "application/zstd",
    "application/pdf",
    "application/wasm",
    "application/vnd.android.package-archive",
    "application/java-archive",
    "application/x-binary",
];

/// The kind of body `media` takes in `spec`.
pub(crate) fn body_kind(spec: &Spec, media: &MediaType) -> BodyKind {
    let essence = super::media_essence(&media.content_type);
    let (main, sub) = essence.split_once('/').unwrap_or((essence.as_str(), ""));
    if main == "multipart" {
        return BodyKind::Multipart;
    }
    let text = main == "text"
        || sub == "json"
        || sub.ends_with("+json")
        || sub == "xml"
        || sub.ends_with("+xml")
        || essence == "application/x-www-form-urlencoded";
    if text {
        return BodyKind::Text;
    }
    let binary = BINARY_TYPES.contains(&essence.as_str())
        || matches!(main, "image" | "audio" | "video" | "font")
        || is_binary_schema(spec, &media.schema);
    if binary {
        BodyKind::Binary
    } else {
        BodyKind::Text
    }
}

/// Whether `schema` is a binary string: `type: string` with `format: binary` (OpenAPI 3.0;
/// Swagger 2.0 `type: file` is loaded as this), or with a `contentMediaType` and no
/// `contentEncoding` (OpenAPI 3.1; with `contentEncoding: base64` the API wants base64 text,
/// which the agent passes as a string).
pub(crate) fn is_binary_schema(spec: &Spec, schema: &Value) -> bool {
    let s = spec.follow(schema);
    let string = match s.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        _ => false,
    };
    string
        && (s.get("format").and_then(Value::as_str) == Some("binary")
            || (s.get("contentMediaType").is_some() && s.get("contentEncoding").is_none()))
}

/// Whether a field of a multipart body takes a file part, and in which forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileField {
    /// A binary string ([`is_binary_schema`]): a string value is the file's bytes too.
    Binary,
    /// Any other string (Stripe's `file` is `{"type": "string"}`, its format whatever), a
    /// schema with no type (Discourse's `file` is `{}`), or a field the media type's
    /// `encoding` names a `contentType` for: a value written as bytes (`{"base64": …}`,
    /// `{"file": …}`) is a file part, a string stays a text part.
    Accepts,
    /// Not a file field: bytes are refused.
    No,
}

/// Whether `schema` (a field of a multipart body) may hold a file: a string of any format, or
/// a schema that says nothing of its type or shape.
fn may_be_file(spec: &Spec, schema: &Value) -> bool {
    let s = spec.follow(schema);
    match s.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
        Some(_) => false,
        None => {
            const SHAPED: [&str; 9] = [
                "properties",
                "additionalProperties",
                "items",
                "allOf",
                "anyOf",
                "oneOf",
                "enum",
                "const",
                "$ref",
            ];
            s.as_object()
                .is_some_and(|m| !SHAPED.iter().any(|k| m.contains_key(*k)))
        }
    }
}

/// How the multipart field `name` of `media`, declared with `schema` (`None`: undeclared),
/// takes a file: see [`FileField`].
pub(crate) fn file_field(
    spec: &Spec,
    media: &MediaType,
    name: &str,
    schema: Option<&Value>,
) -> FileField {
    match schema {
        Some(s) if is_binary_schema(spec, s) => FileField::Binary,
        Some(s) if may_be_file(spec, s) => FileField::Accepts,
        _ if media.part_types.iter().any(|(n, _)| n == name) => FileField::Accepts,
        _ => FileField::No,
    }
}

/// How each item of the multipart array field `name` takes a file (the `encoding` of an array
/// field applies to each item).
pub(crate) fn file_items(
    spec: &Spec,
    media: &MediaType,
    name: &str,
    schema: Option<&Value>,
) -> FileField {
    let items = schema.and_then(|s| spec.follow(s).get("items"));
    match items {
        Some(i) if is_binary_schema(spec, i) => FileField::Binary,
        Some(i) if may_be_file(spec, i) => FileField::Accepts,
        Some(_) if media.part_types.iter().any(|(n, _)| n == name) => FileField::Accepts,
        _ => FileField::No,
    }
}

/// The media type a file part of the field `name` goes out as when the call names none: the
/// one `encoding.{name}.contentType` names, when it names exactly one concrete type (not a
/// list such as `image/png, image/jpeg`, nor a range); else `None` (the default,
/// `application/octet-stream`).
pub(crate) fn part_type(media: &MediaType, name: &str) -> Option<String> {
    let (_, declared) = media.part_types.iter().find(|(n, _)| n == name)?;
    let one = !declared.contains([',', '*']) && check_media_type(declared).is_ok();
    one.then(|| declared.clone())
}

/// `Err` with the reason when `name` cannot be a part's filename: empty, over
/// [`MAX_PART_TEXT_BYTES`], or holding a quote, backslash, line break or other control
/// character (it goes inside `filename="…"`), or a bidirectional control (it would make the
/// name read as another, `crate::printable::is_unprintable`).
pub(crate) fn check_filename(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty; leave it out to use the field name".into());
    }
    if name.len() > MAX_PART_TEXT_BYTES {
        return Err(format!(
            "{} bytes, over the limit of {MAX_PART_TEXT_BYTES}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| crate::printable::is_unprintable(*c) || matches!(c, '"' | '\\'))
    {
        return Err(format!(
            "holds {c:?}: a filename may not hold quotes, backslashes, line breaks, control \
             characters or bidirectional controls (U+202E makes `gpj.exe` show as `exe.jpg`)"
        ));
    }
    Ok(())
}

/// `Err` with the reason when `text` is not a media type (`type/subtype`, optional
/// `; name=value` parameters, at most [`MAX_PART_TEXT_BYTES`] bytes).
pub(crate) fn check_media_type(text: &str) -> Result<(), String> {
    if text.len() > MAX_PART_TEXT_BYTES {
        return Err(format!(
            "{} bytes, over the limit of {MAX_PART_TEXT_BYTES}",
            text.len()
        ));
    }
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let mut pieces = text.split(';');
    let essence = pieces.next().unwrap_or_default().trim();
    let well_formed = essence
        .split_once('/')
        .is_some_and(|(t, s)| token(t) && token(s));
    if !well_formed {
        return Err(format!(
            "{text:?} is not a media type (type/subtype, e.g. image/png)"
        ));
    }
    for param in pieces {
        let ok = param.trim().split_once('=').is_some_and(|(n, v)| {
            let v = v.trim();
            let quoted = v.len() >= 2
                && v.starts_with('"')
                && v.ends_with('"')
                && v[1..v.len() - 1]
                    .chars()
                    .all(|c| !c.is_control() && !matches!(c, '"' | '\\'));
            token(n.trim()) && (token(v) || quoted)
        });
        if !ok {
            return Err(format!(
                "{text:?}: the parameter {param:?} is not name=value"
            ));
        }
    }
    Ok(())
}

/// Whether the declared media type `declared` (maybe a range: `image/*`, `*/*`) admits
/// `asked`.
pub(crate) fn media_admits(declared: &str, asked: &str) -> bool {
    let (d, a) = (super::media_essence(declared), super::media_essence(asked));
    if d == a || d == "*/*" {
        return true;
    }
    match (d.strip_suffix("/*"), a.split_once('/')) {
        (Some(main), Some((a_main, _))) => main == a_main,
        _ => false,
    }
}

/// The `Content-Type` a binary body goes out with: the media type the call asked for, else
/// the declared one, else (a declared range such as `image/*`) `application/octet-stream`.
pub(crate) fn binary_content_type(declared: &str, asked: Option<&str>) -> String {
    match asked {
        Some(a) => a.to_string(),
        None if declared.contains('*') => "application/octet-stream".into(),
        None => declared.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_and_media_types_are_checked() {
        let long_name = "x".repeat(256);
        let long_type = format!("a/{}", "b".repeat(300));
        let name = |s: &str| check_filename(s).is_ok();
        let media = |s: &str| check_media_type(s).is_ok();
        type Check<'a> = &'a dyn Fn(&str) -> bool;
        let cases: [(&str, Check, bool); 22] = [
            ("report.pdf", &name, true),
            ("invoice\u{202e}fdp.exe", &name, false),
            ("a\u{2066}b.pdf", &name, false),
            ("x\u{200f}.png", &name, false),
            ("a b (1).zip", &name, true),
            ("résumé.txt", &name, true),
            ("", &name, false),
            ("a\"b", &name, false),
            ("a\r\nContent-Type: x", &name, false),
            ("a\\b", &name, false),
            ("tab\there", &name, false),
            (&long_name, &name, false),
            ("image/png", &media, true),
            ("text/plain; charset=utf-8", &media, true),
            ("a/b; x=\"y z\"", &media, true),
            ("png", &media, false),
            ("image/", &media, false),
            ("image/png\r\nX-Evil: 1", &media, false),
            ("image/png; charset", &media, false),
            ("a/b; x=\"y\"z\"", &media, false),
            ("im age/png", &media, false),
            (&long_type, &media, false),
        ];
        for (text, check, ok) in cases {
            assert_eq!(check(text), ok, "{text:?}");
        }
    }

    #[test]
    fn media_ranges_admit_their_types() {
        assert!(media_admits("image/*", "image/png"));
        assert!(media_admits("*/*", "application/zip"));
        assert!(media_admits("Application/Zip", "application/zip; x=1"));
        assert!(!media_admits("image/*", "text/plain"));
        assert!(!media_admits("image/png", "image/jpeg"));
        assert_eq!(
            binary_content_type("image/*", None),
            "application/octet-stream"
        );
        assert_eq!(
            binary_content_type("image/*", Some("image/png")),
            "image/png"
        );
        assert_eq!(
            binary_content_type("application/zip", None),
            "application/zip"
        );
    }

    /// Each row: a media type and its schema in an OpenAPI 3.1 document, and the kind of body.
    #[test]
    fn body_kinds_follow_the_media_type_then_the_schema() {
        let rows = [
            ("application/octet-stream", json!({}), BodyKind::Binary),
            (
                "application/zip",
                json!({"type": "string"}),
                BodyKind::Binary,
            ),
            ("image/png", json!({}), BodyKind::Binary),
            ("video/mp4", json!({}), BodyKind::Binary),
            ("application/pdf", json!({}), BodyKind::Binary),
            (
                "application/x-custom",
                json!({"type": "string", "format": "binary"}),
                BodyKind::Binary,
            ),
            (
                "application/x-custom",
                json!({"type": "string", "contentMediaType": "image/png"}),
                BodyKind::Binary,
            ),
            (
                "application/x-custom",
                json!({"type": "string", "contentMediaType": "image/png", "contentEncoding": "base64"}),
                BodyKind::Text,
            ),
            (
                "application/x-custom",
                json!({"$ref": "#/components/schemas/Bin"}),
                BodyKind::Binary,
            ),
            (
                "application/x-custom",
                json!({"type": "string"}),
                BodyKind::Text,
            ),
            (
                "application/json",
                json!({"type": "string", "format": "binary"}),
                BodyKind::Text,
            ),
            ("application/vnd.github+json", json!({}), BodyKind::Text),
            (
                "text/csv",
                json!({"type": "string", "format": "binary"}),
                BodyKind::Text,
            ),
            (
                "application/x-www-form-urlencoded",
                json!({}),
                BodyKind::Text,
            ),
            ("application/soap+xml", json!({}), BodyKind::Text),
            ("multipart/form-data", json!({}), BodyKind::Multipart),
            ("multipart/mixed", json!({}), BodyKind::Multipart),
        ];
        let doc = json!({
            "openapi": "3.1.0", "info": {"title": "t", "version": "1"},
            "paths": {"/x": {"post": {"operationId": "x", "requestBody": {"content": {
                "application/x-custom": {"schema": {"$ref": "#/components/schemas/Bin"}}}},
                "responses": {"200": {"description": "ok"}}}}},
            "components": {"schemas": {"Bin": {"type": "string", "format": "binary"}}}
        });
        let spec = Spec::from_bytes(doc.to_string().as_bytes(), "t.json").unwrap();
        for (content_type, schema, kind) in rows {
            let media = MediaType {
                content_type: content_type.into(),
                schema: schema.clone(),
                part_types: Vec::new(),
            };
            assert_eq!(body_kind(&spec, &media), kind, "{content_type} {schema}");
        }
    }

    /// Each row: a field's schema, whether the `encoding` object names a media type for it,
    /// and how the field and its items take a file.
    #[test]
    fn file_fields_are_the_strings_the_specs_write() {
        use FileField::{Accepts, Binary, No};
        let doc = json!({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "paths": {"/x": {"post": {"operationId": "x", "requestBody": {"content": {
                "multipart/form-data": {"schema": {"properties": {
                    "a": {"$ref": "#/components/schemas/Bin"},
                    "b": {"$ref": "#/components/schemas/Text"}}}}}},
                "responses": {"200": {"description": "ok"}}}}},
            "components": {"schemas": {"Bin": {"type": "string", "format": "binary"},
                                       "Text": {"type": "string"}}}
        });
        let spec = Spec::from_bytes(doc.to_string().as_bytes(), "t.json").unwrap();
        let rows = [
            (
                json!({"type": "string", "format": "binary"}),
                false,
                Binary,
                No,
            ),
            (
                json!({"$ref": "#/components/schemas/Bin"}),
                false,
                Binary,
                No,
            ),
            // Stripe's `file`: RFC 2388 in words only.
            (
                json!({"type": "string", "description": "RFC 2388"}),
                false,
                Accepts,
                No,
            ),
            (
                json!({"$ref": "#/components/schemas/Text"}),
                false,
                Accepts,
                No,
            ),
            (
                json!({"type": "string", "format": "byte"}),
                false,
                Accepts,
                No,
            ),
            (json!({"type": ["string", "null"]}), false, Accepts, No),
            // Discourse's `file`: no type at all.
            (json!({}), false, Accepts, No),
            (json!({"description": "the file"}), false, Accepts, No),
            (json!({"type": "integer"}), false, No, No),
            (json!({"type": "boolean"}), false, No, No),
            (json!({"type": "object", "properties": {}}), false, No, No),
            (json!({"properties": {"a": {}}}), false, No, No),
            (json!({"enum": ["a", "b"]}), false, No, No),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
                false,
                No,
                No,
            ),
            // The OpenAPI Specification's encoding example: an XML part for an object.
            (
                json!({"type": "object", "properties": {}}),
                true,
                Accepts,
                No,
            ),
            (json!({"type": "integer"}), true, Accepts, No),
            (
                json!({"type": "array", "items": {"type": "string", "format": "binary"}}),
                false,
                No,
                Binary,
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                false,
                No,
                Accepts,
            ),
            (
                json!({"type": "array", "items": {"type": "object"}}),
                false,
                No,
                No,
            ),
            (
                json!({"type": "array", "items": {"type": "object"}}),
                true,
                Accepts,
                Accepts,
            ),
        ];
        for (schema, encoded, field, items) in rows {
            let media = MediaType {
                content_type: "multipart/form-data".into(),
                schema: json!({}),
                part_types: if encoded {
                    vec![("f".into(), "application/xml".into())]
                } else {
                    Vec::new()
                },
            };
            assert_eq!(
                file_field(&spec, &media, "f", Some(&schema)),
                field,
                "{schema}"
            );
            assert_eq!(
                file_items(&spec, &media, "f", Some(&schema)),
                items,
                "{schema} items"
            );
        }
        let plain = MediaType {
            content_type: "multipart/form-data".into(),
            schema: json!({}),
            part_types: Vec::new(),
        };
        assert_eq!(file_field(&spec, &plain, "f", None), No);
    }

    #[test]
    fn a_part_takes_the_one_type_its_encoding_names() {
        let media = MediaType {
            content_type: "multipart/form-data".into(),
            schema: json!({}),
            part_types: vec![
                ("history".into(), "application/xml; charset=utf-8".into()),
                ("image".into(), "image/png, image/jpeg".into()),
                ("any".into(), "image/*".into()),
                ("bad".into(), "not a type".into()),
            ],
        };
        let part = |n: &str| part_type(&media, n);
        assert_eq!(
            part("history").as_deref(),
            Some("application/xml; charset=utf-8")
        );
        for none in ["image", "any", "bad", "missing"] {
            assert_eq!(part(none), None, "{none}");
        }
    }

    #[test]
    fn a_dry_run_shows_a_digest_not_the_bytes() {
        let u = Upload {
            bytes: Bytes::from_static(b"hello"),
            filename: Some("h.txt".into()),
            content_type: None,
        };
        let shown = u.describe("text/plain");
        assert_eq!(shown["bytes"], 5);
        assert_eq!(shown["sha256"], "2cf24dba5fb0a30e…");
        assert_eq!(shown["filename"], "h.txt");
    }
}
