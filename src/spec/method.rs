//! `Method`: the HTTP methods an OpenAPI path item may hold, and which of them are safe. The
//! one place apigate decides what a read-only caller may call and what counts as mutating.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An HTTP method an operation can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Get,
    Put,
    Post,
    Delete,
    Options,
    Head,
    Patch,
    Trace,
}

impl Method {
    /// Every method, in the order OpenAPI lists a path item's operations.
    pub const ALL: [Method; 8] = [
        Method::Get,
        Method::Put,
        Method::Post,
        Method::Delete,
        Method::Options,
        Method::Head,
        Method::Patch,
        Method::Trace,
    ];

    /// `GET`, `POST`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Put => "PUT",
            Method::Post => "POST",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Head => "HEAD",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
        }
    }

    /// The key of the operation in an OpenAPI path item: `get`, `post`, …
    pub(crate) fn path_item_key(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Put => "put",
            Method::Post => "post",
            Method::Delete => "delete",
            Method::Options => "options",
            Method::Head => "head",
            Method::Patch => "patch",
            Method::Trace => "trace",
        }
    }

    /// Case-insensitive, surrounding white space ignored.
    pub fn parse(text: &str) -> Option<Method> {
        let text = text.trim();
        Method::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(text))
    }

    /// Whether a read-only caller may use it: GET, HEAD and OPTIONS. RFC 9110 also calls TRACE
    /// safe, but TRACE echoes the request back, credentials apigate adds included, so apigate
    /// treats it as unsafe.
    pub(crate) fn is_safe(self) -> bool {
        matches!(self, Method::Get | Method::Head | Method::Options)
    }

    /// Whether a call may change data: every method that is not safe (TRACE included). What
    /// discovery marks `mutating`, what the monitor's approval rule asks a person about, and
    /// what a result's `_meta` reports: one answer for all three.
    pub(crate) fn is_mutating(self) -> bool {
        !self.is_safe()
    }
}

impl Method {
    /// Whether sending it twice has the effect of sending it once (RFC 9110 §9.2.2): all but
    /// POST and PATCH. A failed POST or PATCH may have been applied and must not be blindly
    /// retried.
    pub(crate) fn is_idempotent(self) -> bool {
        !matches!(self, Method::Post | Method::Patch)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for text that is not one of the eight methods.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an HTTP method: use GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH or TRACE")]
pub struct NotAMethod(pub String);

impl FromStr for Method {
    type Err = NotAMethod;

    fn from_str(s: &str) -> Result<Method, NotAMethod> {
        Method::parse(s).ok_or_else(|| NotAMethod(s.chars().take(40).collect()))
    }
}

impl From<Method> for http::Method {
    fn from(m: Method) -> http::Method {
        match m {
            Method::Get => http::Method::GET,
            Method::Put => http::Method::PUT,
            Method::Post => http::Method::POST,
            Method::Delete => http::Method::DELETE,
            Method::Options => http::Method::OPTIONS,
            Method::Head => http::Method::HEAD,
            Method::Patch => http::Method::PATCH,
            Method::Trace => http::Method::TRACE,
        }
    }
}

impl Serialize for Method {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// In a derived JSON Schema (the tools' output schemas): one of the eight names.
impl schemars::JsonSchema for Method {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Method".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
        schemars::json_schema!({"type": "string", "enum": names})
    }
}

impl<'de> Deserialize<'de> for Method {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Method, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_any_case_and_round_trips() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), Some(m));
            assert_eq!(Method::parse(m.path_item_key()), Some(m));
            let json = serde_json::to_value(m).unwrap();
            assert_eq!(serde_json::from_value::<Method>(json).unwrap(), m);
        }
        assert_eq!(Method::parse(" pAtCh "), Some(Method::Patch));
        assert_eq!(Method::parse("FETCH"), None);
        assert!("CONNECT".parse::<Method>().is_err());
    }

    #[test]
    fn post_and_patch_are_not_idempotent() {
        let not: Vec<Method> = Method::ALL
            .into_iter()
            .filter(|m| !m.is_idempotent())
            .collect();
        assert_eq!(not, [Method::Post, Method::Patch]);
    }

    #[test]
    fn only_get_head_and_options_are_safe() {
        let safe: Vec<Method> = Method::ALL.into_iter().filter(|m| m.is_safe()).collect();
        assert_eq!(safe, [Method::Get, Method::Options, Method::Head]);
    }

    #[test]
    fn every_method_is_safe_or_mutating_never_both() {
        for m in Method::ALL {
            assert_ne!(m.is_safe(), m.is_mutating(), "{m}");
        }
        assert!(Method::Trace.is_mutating());
    }
}
