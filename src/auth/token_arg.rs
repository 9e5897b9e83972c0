//! The `_sessionToken` tool argument of production mode: added to every tool's input schema
//! (described as required) unless the connection carries the `x-session-token` header, taken
//! out of the arguments before the tool runs, and reconciled with that header. JSON only; the
//! MCP adapter and the pipeline call these.

use serde_json::{Map, Value, json};

use super::AuthError;
use crate::secrets_equal;

/// The argument name.
pub(crate) const SESSION_TOKEN_ARG: &str = "_sessionToken";
/// The MCP-connection header that may carry the token instead (keeps it out of the model's
/// context).
pub(crate) const SESSION_TOKEN_HEADER: &str = "x-session-token";

/// Adds `_sessionToken` to an object schema's `properties` and `required`.
pub(crate) fn add_session_token_param(input_schema: &mut Map<String, Value>) {
    let props = input_schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        props.insert(
            SESSION_TOKEN_ARG.into(),
            json!({
                "type": "string",
                "description": "Session authorization token (REQUIRED for all tool calls): the sess_… token you were given",
            }),
        );
    }
    let required = input_schema
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(required) = required
        && !required.iter().any(|r| r == SESSION_TOKEN_ARG)
    {
        required.push(SESSION_TOKEN_ARG.into());
    }
}

/// Removes `_sessionToken` from the arguments (whatever its type) and returns it when it is a
/// non-empty string.
pub(crate) fn take_session_token(args: &mut Map<String, Value>) -> Option<String> {
    match args.remove(SESSION_TOKEN_ARG) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

/// The token to check. Without the connection's `x-session-token` header, the argument.
/// With it, the header: it pins the connection to one session, so an argument may only repeat
/// it. An argument that differs (another session's token, or a placeholder a model filled in)
/// is refused, never preferred: otherwise a read-only session pinned by the header could be
/// swapped for a stronger one by whatever writes the arguments.
pub(crate) fn choose_session_token(
    from_args: Option<String>,
    from_header: Option<&str>,
) -> Result<Option<String>, AuthError> {
    let header = from_header.map(str::trim).filter(|h| !h.is_empty());
    match (from_args, header) {
        (args, None) => Ok(args),
        (None, Some(h)) => Ok(Some(h.to_string())),
        (Some(a), Some(h)) if secrets_equal(&a, h) => Ok(Some(h.to_string())),
        (Some(_), Some(_)) => Err(AuthError::Unauthorized(format!(
            "`{SESSION_TOKEN_ARG}` differs from this connection's {SESSION_TOKEN_HEADER} header, \
             which already names the session: omit `{SESSION_TOKEN_ARG}` from the arguments"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_gets_a_required_token_once() {
        let mut s = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
        let obj = s.as_object_mut().unwrap();
        add_session_token_param(obj);
        add_session_token_param(obj);
        assert_eq!(s["required"], json!(["query", "_sessionToken"]));
        assert_eq!(s["properties"]["_sessionToken"]["type"], "string");
        let mut empty = Map::new();
        add_session_token_param(&mut empty);
        assert_eq!(Value::Object(empty)["required"], json!(["_sessionToken"]));
    }

    #[test]
    fn token_is_removed_from_arguments() {
        let mut args = json!({"query": "pets", "_sessionToken": "sess_abc"});
        let obj = args.as_object_mut().unwrap();
        assert_eq!(take_session_token(obj).as_deref(), Some("sess_abc"));
        assert_eq!(args, json!({"query": "pets"}));
        let mut odd = json!({"_sessionToken": 42});
        assert_eq!(take_session_token(odd.as_object_mut().unwrap()), None);
        assert_eq!(odd, json!({}));
    }

    #[test]
    fn the_header_pins_the_session() {
        let pick = |a: Option<&str>, h: Option<&str>| {
            choose_session_token(a.map(str::to_string), h).map_err(|e| e.to_string())
        };
        assert_eq!(pick(Some("a"), None).unwrap().as_deref(), Some("a"));
        assert_eq!(pick(None, Some(" b ")).unwrap().as_deref(), Some("b"));
        assert_eq!(pick(Some("b"), Some("b")).unwrap().as_deref(), Some("b"));
        assert_eq!(pick(None, Some("")).unwrap(), None);
        assert_eq!(pick(Some("a"), Some("")).unwrap().as_deref(), Some("a"));
        let e = pick(Some("sess_other"), Some("sess_pinned")).unwrap_err();
        assert!(e.contains("x-session-token") && e.contains("omit"), "{e}");
        assert!(
            !e.contains("sess_other") && !e.contains("sess_pinned"),
            "{e}"
        );
    }
}
