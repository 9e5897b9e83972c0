//! The header policy: which request headers apigate forwards, and who may set each. One
//! function per question, used by every place that decides (the agent's `headers` argument,
//! the operator's `--upstream-header`s and scheme credentials, a session's stored upstream
//! headers, the identity assertion's header), with one table-driven test. A leaf: it imports
//! nothing from the crate, so `auth` may use it too.

/// Connection and framing headers: the HTTP client owns them.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// Headers that carry identity: only the server's configuration sets them.
const IDENTITY: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

/// Headers that describe the request body: the operation and the body decide them.
const BODY: [&str; 2] = ["content-type", "content-encoding"];

/// Headers that make many frameworks (Rack, Laravel, Symfony, ASP.NET) apply another method than
/// the one on the wire.
pub(crate) const METHOD_OVERRIDE: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// The form field or query parameter with the same effect (compared without regard to case).
pub(crate) const METHOD_OVERRIDE_FIELD: &str = "_method";

/// Headers a proxy sets to say where a request came from: an API may trust them for its
/// access decisions, so no stored credential may forge them.
fn is_forwarding(lower: &str) -> bool {
    matches!(lower, "forwarded" | "x-real-ip" | "via" | "true-client-ip")
        || lower.starts_with("x-forwarded-")
}

/// A header name as the policy compares it.
fn lower(name: &str) -> String {
    name.trim().to_ascii_lowercase()
}

/// Whether the HTTP client owns the header (connection, framing, `Host`): nobody configures it.
pub(crate) fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.contains(&lower(name).as_str())
}

/// Whether the header carries identity (`Authorization`, `Cookie`, …): only the server's
/// configuration sets it.
pub(crate) fn is_identity(name: &str) -> bool {
    IDENTITY.contains(&lower(name).as_str())
}

/// Whether the operator may configure the header (`--upstream-header`, a scheme credential).
pub(crate) fn operator_may_set(name: &str) -> bool {
    !is_hop_by_hop(name)
}

/// Whether an agent may set the header through `api_execute`'s `headers` (when the operation
/// declares it): never identity, connection or framing headers, nor `Expect`.
pub(crate) fn agent_may_set(name: &str) -> bool {
    let lower = lower(name);
    !(IDENTITY.contains(&lower.as_str())
        || HOP_BY_HOP.contains(&lower.as_str())
        || lower == "expect")
}

/// Whether a session may store the header as its own upstream credential: not a connection,
/// framing or body header, not a proxy's (`Proxy-Authorization`, `Forwarded`, `X-Forwarded-*`,
/// `X-Real-IP`), not `Accept-Encoding` (apigate decides what it can decode), not a method
/// override (a read-only session's GET would act as a DELETE), and not apigate's own
/// `x-session-token`.
pub(crate) fn session_may_store(name: &str) -> bool {
    let lower = lower(name);
    let l = lower.as_str();
    !(HOP_BY_HOP.contains(&l)
        || BODY.contains(&l)
        || METHOD_OVERRIDE.contains(&l)
        || is_forwarding(l)
        || matches!(
            l,
            "expect" | "set-cookie" | "proxy-authorization" | "accept-encoding" | "x-session-token"
        ))
}

/// Whether the header can carry the signed identity assertion: not connection, framing, body,
/// `Host` or cookie headers (`Authorization` may).
pub(crate) fn may_carry_assertion(name: &str) -> bool {
    let lower = lower(name);
    let l = lower.as_str();
    l == "authorization"
        || (agent_may_set(l) && !BODY.contains(&l) && !METHOD_OVERRIDE.contains(&l))
}

/// Whether the header asks for a method override.
pub(crate) fn is_method_override(name: &str) -> bool {
    METHOD_OVERRIDE.contains(&lower(name).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per header: may the operator set it, may an agent, may a session store it, may
    /// it carry the assertion; is it hop-by-hop.
    #[test]
    fn one_table_for_every_question() {
        #[rustfmt::skip]
        let rows: &[(&str, bool, bool, bool, bool, bool)] = &[
            // name                    operator agent  session assert  hop
            ("Connection",             false,   false, false,  false,  true),
            ("Transfer-Encoding",      false,   false, false,  false,  true),
            ("Host",                   false,   false, false,  false,  true),
            ("content-length",         false,   false, false,  false,  true),
            ("Keep-Alive",             false,   false, false,  false,  true),
            ("Authorization",          true,    false, true,   true,   false),
            ("Proxy-Authorization",    true,    false, false,  false,  false),
            ("Cookie",                 true,    false, true,   false,  false),
            ("Set-Cookie",             true,    false, false,  false,  false),
            ("Content-Type",           true,    true,  false,  false,  false),
            ("Content-Encoding",       true,    true,  false,  false,  false),
            ("Expect",                 true,    false, false,  false,  false),
            ("X-HTTP-Method-Override", true,    true,  false,  false,  false),
            ("X-HTTP-Method",          true,    true,  false,  false,  false),
            ("X-Method-Override",      true,    true,  false,  false,  false),
            ("Forwarded",              true,    true,  false,  true,   false),
            ("X-Forwarded-For",        true,    true,  false,  true,   false),
            ("x-forwarded-host",       true,    true,  false,  true,   false),
            ("X-Real-IP",              true,    true,  false,  true,   false),
            ("Accept-Encoding",        true,    true,  false,  true,   false),
            ("x-session-token",        true,    true,  false,  true,   false),
            ("X-Api-Key",              true,    true,  true,   true,   false),
            ("X-Apigate-Identity",     true,    true,  true,   true,   false),
            (" Accept ",               true,    true,  true,   true,   false),
        ];
        for &(name, operator, agent, session, assertion, hop) in rows {
            assert_eq!(operator_may_set(name), operator, "operator {name}");
            assert_eq!(agent_may_set(name), agent, "agent {name}");
            assert_eq!(session_may_store(name), session, "session {name}");
            assert_eq!(may_carry_assertion(name), assertion, "assertion {name}");
            assert_eq!(is_hop_by_hop(name), hop, "hop-by-hop {name}");
            let identity = [
                "authorization",
                "proxy-authorization",
                "cookie",
                "set-cookie",
            ]
            .contains(&name.trim().to_ascii_lowercase().as_str());
            assert_eq!(is_identity(name), identity, "identity {name}");
        }
    }
}
