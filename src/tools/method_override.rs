//! Method overrides: the `X-HTTP-Method-Override`, `X-HTTP-Method` and `X-Method-Override`
//! headers and a `_method` query parameter or form field (urlencoded or multipart body) make
//! many frameworks apply another HTTP method than the one on the wire, so a declared GET can act
//! as a DELETE. A request that carries one is
//! checked as the method it names too: a read-only caller may not send one at all, and any
//! other caller needs what that method needs (the config rules for it on the same path, and the
//! `x-required-features` of the spec's operation with that method and path).

use serde_json::Value;

use super::error::ToolError;
use crate::auth::Principal;
use crate::spec::Operation;
use crate::types::Code;
use crate::upstream::PreparedRequest;
use crate::upstream::headers::{METHOD_OVERRIDE_FIELD, is_method_override};

/// The overrides the request carries: (where, as the agent would name it; the methods named).
fn overrides(request: &PreparedRequest) -> Vec<(String, Vec<String>)> {
    let methods = |text: &str| -> Vec<String> {
        text.split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .filter(|m| !m.is_empty())
            .collect()
    };
    let mut found = Vec::new();
    for (name, value) in &request.headers {
        if is_method_override(name.as_str()) {
            let text = String::from_utf8_lossy(value.as_bytes());
            found.push((format!("the {name} header"), methods(&text)));
        }
    }
    for (name, value) in request.url.query_pairs() {
        if name.eq_ignore_ascii_case(METHOD_OVERRIDE_FIELD) {
            found.push((format!("the {name} query parameter"), methods(&value)));
        }
    }
    // Rack, Laravel and Symfony read `_method` from a form or multipart body as well.
    if let Some(body) = &request.body {
        let ct = body.content_type.to_ascii_lowercase();
        if ct.starts_with("application/x-www-form-urlencoded") {
            for (name, value) in url::form_urlencoded::parse(&body.bytes) {
                if name.eq_ignore_ascii_case(METHOD_OVERRIDE_FIELD) {
                    found.push((format!("the {name} form field"), methods(&value)));
                }
            }
        } else if ct.starts_with("multipart/form-data")
            && let Value::Object(fields) = &body.shown
        {
            for (name, value) in fields {
                if name.eq_ignore_ascii_case(METHOD_OVERRIDE_FIELD) {
                    let text = crate::upstream::scalar(value);
                    found.push((format!("the {name} multipart field"), methods(&text)));
                }
            }
        }
    }
    found
}

/// Refuses a request whose method override the caller may not use.
pub fn check(
    api: &crate::apis::Api,
    principal: &Principal,
    op: &Operation,
    request: &PreparedRequest,
) -> Result<(), ToolError> {
    for (via, methods) in overrides(request) {
        if principal.read_only {
            return Err(ToolError::new(
                Code::Forbidden,
                format!(
                    "permission denied: a read-only caller may not send {via}: a method override \
                     asks the API to apply another method than {}; call without it",
                    op.method
                ),
            )
            .with("readOnly", Value::Bool(true)));
        }
        for method in methods {
            // What the operation with that method on this path needs, when the spec has one.
            let declared = api
                .spec
                .operations
                .iter()
                .filter(|o| o.path == op.path && o.method.as_str() == method)
                .flat_map(|o| o.required_features.iter().map(String::as_str));
            let needed = declared.chain(api.rules.required_for(&method, &op.path));
            if let Some(missing) = principal.features.first_missing(needed) {
                return Err(ToolError::new(
                    Code::Forbidden,
                    format!(
                        "permission denied: {via} asks for {method} {}, which needs the feature \
                         `{missing}` this caller lacks",
                        op.path
                    ),
                )
                .with("missing", Value::String(missing.to_string())));
            }
        }
    }
    Ok(())
}
