//! apigate: an MCP server that turns any OpenAPI document into three meta-tools
//! (`api_discover`, `api_schema`, `api_execute`). See `docs/design.md` for the
//! architecture; each module's own docs say what it owns and what it may import.

pub mod apis;
pub mod auth;
pub mod cli;
pub(crate) mod heap;
pub mod held;
pub mod http;
pub mod index;
pub mod mcp;
pub mod monitor;
pub(crate) mod printable;
pub mod spec;
pub mod store;
pub mod tools;
pub mod types;
pub mod upstream;

/// Constant-time equality of two secrets of any length (compares their SHA-256 digests): the
/// one comparison of a presented key, token or secret with the expected one, for `auth`,
/// `http` and the reference monitor alike.
pub(crate) fn secrets_equal(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let (a, b): ([u8; 32], [u8; 32]) = (Sha256::digest(a).into(), Sha256::digest(b).into());
    a.ct_eq(&b).into()
}

/// `impl Debug` showing only the named fields, for a type that holds a secret or something too
/// large to print. A bare name shows that field; `name: value` shows `value` under that name; a
/// trailing `..` prints `..` after the fields (the type has more than it shows):
///
/// - `debug_fields!(Store { .. })`
/// - `debug_fields!(CreatedKey { id, key: "<redacted>", name, .. })`
/// - `debug_fields!(|a: Admin| { actor: a.actor.label, .. })`: `a` is `&self`, for values that
///   read the value itself.
macro_rules! debug_fields {
    ($name:ident { .. }) => {
        $crate::debug_fields!(@impl this $name {} finish_non_exhaustive);
    };
    ($name:ident { $($body:tt)+ }) => {
        $crate::debug_fields!(|this: $name| { $($body)+ });
    };
    (|$this:ident: $name:ident| { $($field:ident $(: $value:expr)?),+ , .. }) => {
        $crate::debug_fields!(@impl $this $name { $($field $(: $value)?),+ } finish_non_exhaustive);
    };
    (|$this:ident: $name:ident| { $($field:ident $(: $value:expr)?),+ $(,)? }) => {
        $crate::debug_fields!(@impl $this $name { $($field $(: $value)?),+ } finish);
    };
    (@impl $this:ident $name:ident { $($field:ident $(: $value:expr)?),* } $finish:ident) => {
        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                #[allow(unused_variables)]
                let $this = self;
                f.debug_struct(stringify!($name))
                    $(.field(stringify!($field), $crate::debug_fields!(@value $this $field $($value)?)))*
                    .$finish()
            }
        }
    };
    (@value $this:ident $field:ident) => {
        &$this.$field
    };
    (@value $this:ident $field:ident $value:expr) => {
        &$value
    };
}
pub(crate) use debug_fields;

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
