//! The request body in the media type it goes out as: which declared media type a call uses
//! ([`choose_media`]), and its bytes: JSON, `application/x-www-form-urlencoded`,
//! `multipart/form-data` (with file parts), raw text, or the uploaded bytes of a binary body.

use serde_json::Value;

use super::UpstreamError;
use super::encode;
use super::media_essence;
use super::upload::{self, BodyKind, Uploads};
use crate::spec::{Dialect, MediaType, Operation, Spec};

/// An encoded body and how a dry run shows it.
#[derive(Clone)]
pub(crate) struct Body {
    pub bytes: bytes::Bytes,
    pub content_type: String,
    /// How the dry run shows it: the JSON value, or the encoded text.
    pub shown: Value,
}

/// The media type a body goes out as: the one `asked` names (a declared range such as
/// `image/*` admits its types), else for Swagger 2.0 `formData` the form type, else the
/// operation's preferred one. `Ok(None)` when the operation declares no media type.
pub(crate) fn choose_media<'a>(
    spec: &Spec,
    op: &'a Operation,
    asked: Option<&str>,
) -> Result<Option<&'a MediaType>, UpstreamError> {
    let Some(rb) = &op.request_body else {
        return Ok(None);
    };
    let form = rb.content.iter().find(|m| {
        let ct = m.content_type.to_ascii_lowercase();
        ct.starts_with("application/x-www-form-urlencoded") || ct.starts_with("multipart/form-data")
    });
    Ok(match (asked, form) {
        (Some(asked), _) => {
            let wanted = media_essence(asked);
            let exact = rb
                .content
                .iter()
                .find(|m| media_essence(&m.content_type) == wanted);
            Some(
                exact
                    .or_else(|| {
                        rb.content
                            .iter()
                            .find(|m| upload::media_admits(&m.content_type, asked))
                    })
                    .ok_or_else(|| {
                        invalid(format!("contentType: {} does not take {asked:?}", op.key()))
                    })?,
            )
        }
        (None, Some(f)) if spec.dialect == Dialect::Swagger2 => Some(f),
        (None, _) => rb.preferred(),
    })
}

/// Encodes the body as the chosen media type ([`choose_media`]). Swagger 2.0 `formData`
/// parameters are sent form-encoded even when the operation also lists JSON in `consumes`
/// (Slack's Web API does): the parameters are form fields by definition. `uploads` carries
/// the bytes of a binary body or of multipart file parts.
pub(crate) fn body(
    spec: &Spec,
    op: &Operation,
    value: Option<&Value>,
    asked: Option<&str>,
    uploads: &Uploads,
) -> Result<Option<Body>, UpstreamError> {
    let Some(rb) = &op.request_body else {
        return match value {
            Some(_) => Err(invalid(format!("body: {} takes no request body", op.key()))),
            None => Ok(None),
        };
    };
    let Some(value) = value else {
        return if rb.required {
            Err(invalid(format!(
                "body: {} requires a request body",
                op.key()
            )))
        } else {
            Ok(None)
        };
    };
    let media = choose_media(spec, op, asked)?;
    let kind = media.map(|m| upload::body_kind(spec, m));
    let declared = media
        .map(|m| m.content_type.clone())
        .unwrap_or_else(|| "application/json".into());
    if let Uploads::Body(bytes) = uploads {
        if kind != Some(BodyKind::Binary) {
            return Err(invalid(format!(
                "body: {declared} is not a binary media type; bytes go only to a binary body \
                 (application/octet-stream, image/png, …) or a multipart file field"
            )));
        }
        let content_type = upload::binary_content_type(&declared, asked);
        return Ok(Some(Body {
            shown: bytes.describe(&content_type),
            bytes: bytes.bytes.clone(),
            content_type,
        }));
    }
    let parts: &[(String, upload::Upload)] = match uploads {
        Uploads::Parts(parts) if kind != Some(BodyKind::Multipart) => {
            return Err(invalid(format!(
                "body: {declared} has no file fields; files go only to a multipart/form-data body"
            )));
        }
        Uploads::Parts(parts) => parts,
        _ => &[],
    };
    // A declared range (`*/*`, `application/*`) sends the type the call asked for.
    let declared = match asked {
        Some(a) if declared.contains('*') => a.to_string(),
        _ => declared,
    };
    let ct = declared.to_ascii_lowercase();
    let object = |what: &str| {
        value.as_object().ok_or_else(|| {
            invalid(format!(
                "body: {} sends {what}; pass the body as an object of fields",
                op.key()
            ))
        })
    };
    let body = if ct.contains("json") || ((ct.contains('*') || ct.is_empty()) && !value.is_string())
    {
        let content_type = if ct.contains('*') || ct.is_empty() {
            "application/json".to_string()
        } else {
            declared
        };
        Body {
            bytes: serde_json::to_vec(value)
                .map_err(|e| UpstreamError::Other(e.to_string()))?
                .into(),
            content_type,
            shown: value.clone(),
        }
    } else if ct.starts_with("application/x-www-form-urlencoded") {
        let text = encode::form_body(object("application/x-www-form-urlencoded")?);
        Body {
            bytes: text.clone().into_bytes().into(),
            content_type: "application/x-www-form-urlencoded".into(),
            shown: Value::String(text),
        }
    } else if ct.starts_with("multipart/form-data") {
        let fields = object("multipart/form-data")?;
        let (bytes, boundary) = encode::multipart_body(fields, parts);
        let bytes = bytes.into();
        let mut shown = fields.clone();
        for (name, part) in parts {
            let described = part.describe(
                part.content_type
                    .as_deref()
                    .unwrap_or(encode::DEFAULT_PART_TYPE),
            );
            match shown.get_mut(name) {
                Some(Value::Array(items)) => {
                    if let Some(slot) = items.iter_mut().find(|v| !v.is_object()) {
                        *slot = described;
                    }
                }
                Some(slot) => *slot = described,
                None => {}
            }
        }
        Body {
            bytes,
            content_type: format!("multipart/form-data; boundary={boundary}"),
            shown: Value::Object(shown),
        }
    } else {
        let Value::String(text) = value else {
            return Err(invalid(format!(
                "body: {} sends {declared}; pass the body as a string{}",
                op.key(),
                if kind == Some(BodyKind::Binary) {
                    ", or its bytes as {\"base64\": \"…\"}"
                } else {
                    ""
                }
            )));
        };
        Body {
            bytes: text.clone().into_bytes().into(),
            content_type: declared,
            shown: value.clone(),
        }
    };
    Ok(Some(body))
}

fn invalid(message: impl Into<String>) -> UpstreamError {
    UpstreamError::InvalidArguments(message.into())
}
