//! The `sessionID` apigate puts in monitor events. It is made by apigate from what it has
//! validated, never taken from the request: the fingerprint of the API key that authenticated
//! the connection, plus the MCP session rmcp routed the call to (stateful HTTP, legacy SSE,
//! stdio) or else the user session a valid session token opened (production). A client can
//! therefore neither rotate ids to escape a monitor's per-session limits nor name another
//! session to spend its quota: a request's own `mcp-session-id` header is not an input.
//! Pure function; no I/O.

use sha2::{Digest, Sha256};

/// The monitor's id for a session:
///
/// | validated | id |
/// |---|---|
/// | key + user session + MCP session | `key-<16 hex>/session-<uuid>/mcp-<16 hex>` |
/// | key + MCP session | `key-<16 hex>/mcp-<16 hex>` (a SHA-256 of the MCP session id: the id itself is a credential of the session and stays out of the monitor) |
/// | key + user session | `key-<16 hex>/session-<uuid>` |
/// | key only (stateless, dev) | `key-<16 hex>` |
/// | MCP session only (stdio) | `mcp-<16 hex>` |
/// | nothing | `anonymous` |
///
/// `key_fingerprint` is [`crate::mcp::fingerprint`] of the key. The monitor counts its rate rules
/// per id and also per key and per user session, read from these segments.
pub(crate) fn monitor_session_id(
    key_fingerprint: Option<&str>,
    mcp_session: Option<&str>,
    user_session: Option<uuid::Uuid>,
) -> String {
    let session = match (mcp_session, user_session) {
        (Some(mcp), user) => {
            let mcp = format!("mcp-{}", &hex::encode(Sha256::digest(mcp.as_bytes()))[..16]);
            Some(match user {
                // Both: the monitor counts rate rules per user session as well.
                Some(user) => format!("session-{user}/{mcp}"),
                None => mcp,
            })
        }
        (None, Some(user)) => Some(format!("session-{user}")),
        (None, None) => None,
    };
    match (key_fingerprint.filter(|k| !k.is_empty()), session) {
        (Some(key), Some(session)) => format!("{key}/{session}"),
        (Some(key), None) => key.to_owned(),
        (None, Some(session)) => session,
        (None, None) => "anonymous".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_combine_the_key_and_the_validated_session() {
        let key = crate::mcp::fingerprint("test-key");
        let user = uuid::Uuid::new_v4();
        let both = monitor_session_id(Some(&key), Some("5f1c-session"), Some(user));
        assert!(
            both.starts_with(&format!("{key}/session-{user}/mcp-")),
            "{both}"
        );
        assert!(
            !both.contains("5f1c-session"),
            "the MCP session id leaked: {both}"
        );
        let mcp_only = monitor_session_id(Some(&key), Some("5f1c-session"), None);
        assert!(mcp_only.starts_with(&format!("{key}/mcp-")), "{mcp_only}");
        assert!(both.ends_with(&mcp_only[key.len()..]), "{both} {mcp_only}");
        assert_ne!(
            both,
            monitor_session_id(
                Some(&crate::mcp::fingerprint("other")),
                Some("5f1c-session"),
                None
            ),
            "another key on the same MCP session is another monitor session"
        );
        assert_eq!(
            monitor_session_id(Some(&key), None, Some(user)),
            format!("{key}/session-{user}")
        );
        assert_eq!(monitor_session_id(Some(&key), None, None), key);
        assert!(monitor_session_id(None, Some("stdio-1"), None).starts_with("mcp-"));
        assert_eq!(monitor_session_id(None, None, None), "anonymous");
        assert_eq!(monitor_session_id(Some(""), None, None), "anonymous");
    }
}
