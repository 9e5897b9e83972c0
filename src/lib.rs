//! apigate: an MCP server that turns any OpenAPI document into three meta-tools
//! (`api_discover`, `api_schema`, `api_execute`). See `docs/design.md` for the
//! architecture; each module's own docs say what it owns and what it may import.

pub mod auth;
pub mod cli;
pub mod heap;
pub mod held;
pub mod http;
pub mod index;
pub mod mcp;
pub mod monitor;
pub(crate) mod printable;
pub mod spec;
pub mod store;
pub mod tools;
pub mod upstream;

/// Constant-time equality of two secrets of any length (compares their SHA-256 digests): the
/// one comparison of a presented key, token or secret with the expected one, for `auth`,
/// `http` and the reference monitor alike.
pub fn secrets_equal(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let (a, b): ([u8; 32], [u8; 32]) = (Sha256::digest(a).into(), Sha256::digest(b).into());
    a.ct_eq(&b).into()
}

/// An error and its causes on one line (`a: b: c`), leaving out a cause whose text the line
/// already holds. Give it `reqwest::Error::without_url()`: a URL may hold a credential.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}
