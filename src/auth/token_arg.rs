//! The `_sessionToken` tool argument of production mode: added to every tool's input schema
//! (described as required) and taken out of the arguments before the tool runs. JSON only; the
//! MCP adapter and the pipeline call these.

use serde_json::{Map, Value, json};

/// The argument name.
pub const SESSION_TOKEN_ARG: &str = "_sessionToken";
/// The MCP-connection header that may carry the token instead (keeps it out of the model's
/// context).
pub const SESSION_TOKEN_HEADER: &str = "x-session-token";

/// Adds `_sessionToken` to an object schema's `properties` and `required`.
pub fn add_session_token_param(input_schema: &mut Map<String, Value>) {
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
pub fn take_session_token(args: &mut Map<String, Value>) -> Option<String> {
    match args.remove(SESSION_TOKEN_ARG) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

/// The token to check: the argument if given, else the connection's `x-session-token` header.
pub fn choose_session_token(
    from_args: Option<String>,
    from_header: Option<&str>,
) -> Option<String> {
    from_args.or_else(|| {
        from_header
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    })
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
    fn argument_wins_over_header() {
        assert_eq!(
            choose_session_token(Some("a".into()), Some("b")).as_deref(),
            Some("a")
        );
        assert_eq!(
            choose_session_token(None, Some(" b ")).as_deref(),
            Some("b")
        );
        assert_eq!(choose_session_token(None, Some("")), None);
    }
}
