//! [`CredentialSource`]: where a credential an upstream call carries came from. The audit row
//! lists them by name (never a value); behaviour that depends on one (no redirect is followed
//! while a signed identity assertion rides along) matches the variant, not a string.

/// Where one credential of an upstream call came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CredentialSource {
    /// A configured `--upstream-header` (or `[[api]] headers`) that the call did not replace.
    Server,
    /// The OAuth client-credentials token (`--upstream-oauth-*`).
    OAuth,
    /// The credential configured for the operation's security scheme of this name
    /// (`--upstream-credential`).
    Scheme(String),
    /// The session's, or the signed-in person's, own upstream header for this API.
    Session,
    /// The signed identity assertion of the user the call acts for (`--identity-header`).
    Assertion,
}

impl std::fmt::Display for CredentialSource {
    /// As the audit log writes it: `server`, `oauth`, `scheme:NAME`, `session`, `assertion`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::Server => f.write_str("server"),
            CredentialSource::OAuth => f.write_str("oauth"),
            CredentialSource::Scheme(name) => write!(f, "scheme:{name}"),
            CredentialSource::Session => f.write_str("session"),
            CredentialSource::Assertion => f.write_str("assertion"),
        }
    }
}
