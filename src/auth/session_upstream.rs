//! A session's own upstream credentials (`"upstream": {"headers": {…}}` in
//! `POST /admin/v1/sessions`, `--upstream-header` on `apigate sessions create`): checked, sealed
//! with the server's secret key (`sealed.rs`) bound to the session id, stored, and opened again
//! when the session is loaded into the cache. Values never appear in `Debug`, errors or logs.

use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer};
use zeroize::Zeroizing;

use super::sealed::{SealError, SecretKeys};
use crate::upstream::headers;

/// The most headers one session may carry.
pub(crate) const MAX_SESSION_HEADERS: usize = 16;
/// The longest header name.
pub(crate) const MAX_HEADER_NAME: usize = 100;
/// The longest header value.
pub(crate) const MAX_HEADER_VALUE: usize = 8 * 1024;
/// The most bytes of names and values together.
pub(crate) const MAX_HEADERS_TOTAL: usize = 16 * 1024;

/// The headers as given, before any check. `Debug` shows names only; deserialising never
/// echoes a value in its error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct UpstreamInput {
    pub headers: Vec<(String, String)>,
}

crate::debug_fields!(|u: UpstreamInput| {
    headers: u.headers.iter().map(|(n, _)| n.as_str()).collect::<Vec<&str>>(),
});

const SHAPE: &str = "upstream must be an object {\"headers\": {\"Name\": \"value\", …}} of strings";

impl<'de> Deserialize<'de> for UpstreamInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // Through a Value, so that serde's messages (which quote what they got) never carry
        // a credential.
        let value = serde_json::Value::deserialize(d).map_err(|_| D::Error::custom(SHAPE))?;
        let serde_json::Value::Object(mut outer) = value else {
            return Err(D::Error::custom(SHAPE));
        };
        let headers = match outer.remove("headers") {
            Some(serde_json::Value::Object(h)) => h,
            None if outer.is_empty() => serde_json::Map::new(),
            _ => return Err(D::Error::custom(SHAPE)),
        };
        if !outer.is_empty() {
            return Err(D::Error::custom(format!(
                "upstream takes only the field `headers`; {SHAPE}"
            )));
        }
        let headers = headers
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                _ => Err(D::Error::custom(SHAPE)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UpstreamInput { headers })
    }
}

impl UpstreamInput {
    /// From `--upstream-header "Name: value"` arguments.
    pub(crate) fn from_args(args: &[HeaderArg]) -> UpstreamInput {
        UpstreamInput {
            headers: args
                .iter()
                .map(|a| (a.name.clone(), a.value.clone()))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// Checks names, values, count and sizes; the headers as they will be sent.
    pub fn check(&self) -> Result<SessionUpstream, String> {
        if self.headers.len() > MAX_SESSION_HEADERS {
            return Err(format!(
                "a session may carry at most {MAX_SESSION_HEADERS} upstream headers"
            ));
        }
        let mut total = 0usize;
        let mut out: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            let name = name.trim();
            let shown: String = name.chars().take(MAX_HEADER_NAME).collect();
            if name.is_empty() || name.len() > MAX_HEADER_NAME {
                return Err(format!(
                    "upstream header names must have 1 to {MAX_HEADER_NAME} characters"
                ));
            }
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{shown:?} is not a valid header name"))?;
            if !headers::session_may_store(header.as_str()) {
                return Err(format!(
                    "a session may not set the upstream header {header}: connection, framing, \
                     body, proxy and forwarding headers, Accept-Encoding and method overrides \
                     are not credentials"
                ));
            }
            if out.iter().any(|(n, _)| *n == header) {
                return Err(format!("the upstream header {header} is given twice"));
            }
            let value = value.trim();
            if value.is_empty() || value.len() > MAX_HEADER_VALUE {
                return Err(format!(
                    "the value of upstream header {header} must have 1 to {MAX_HEADER_VALUE} bytes"
                ));
            }
            let mut v = HeaderValue::from_str(value).map_err(|_| {
                format!(
                    "the value of upstream header {header} has characters a header cannot carry"
                )
            })?;
            v.set_sensitive(true);
            total += header.as_str().len() + value.len();
            if total > MAX_HEADERS_TOTAL {
                return Err(format!(
                    "the upstream headers are too large together (at most {MAX_HEADERS_TOTAL} bytes)"
                ));
            }
            out.push((header, v));
        }
        Ok(SessionUpstream { headers: out })
    }
}

/// One `--upstream-header "Name: value"` argument. `Debug` shows the name only.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderArg {
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for HeaderArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeaderArg({}: <redacted>)", self.name)
    }
}

impl std::str::FromStr for HeaderArg {
    type Err = String;

    fn from_str(s: &str) -> Result<HeaderArg, String> {
        match s.split_once(':') {
            Some((n, v)) => Ok(HeaderArg {
                name: n.trim().to_string(),
                value: v.trim().to_string(),
            }),
            // Never echo the argument: it may be a bare secret.
            None => Err("expected \"Name: value\" (the argument has no `:`)".to_string()),
        }
    }
}

/// A session's upstream headers, ready to send. `Debug` shows names only.
#[derive(Clone, Default)]
pub struct SessionUpstream {
    headers: Vec<(HeaderName, HeaderValue)>,
}

crate::debug_fields!(|u: SessionUpstream| { headers: u.names() });

/// What is bound into the sealed value: it opens only for this session.
fn context(session_id: uuid::Uuid) -> Vec<u8> {
    format!("apigate:session-upstream:v1:{session_id}").into_bytes()
}

impl SessionUpstream {
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    pub fn names(&self) -> Vec<String> {
        self.headers.iter().map(|(n, _)| n.to_string()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// Seals the headers for `session_id`.
    pub fn seal(&self, keys: &SecretKeys, session_id: uuid::Uuid) -> Result<Vec<u8>, SealError> {
        let pairs: Vec<(&str, &[u8])> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let mut plain = Zeroizing::new(Vec::new());
        for (n, v) in pairs {
            // name \0 value \n — neither can contain NUL or LF.
            plain.extend_from_slice(n.as_bytes());
            plain.push(0);
            plain.extend_from_slice(v);
            plain.push(b'\n');
        }
        keys.seal(&plain, &context(session_id))
    }

    /// Opens what [`SessionUpstream::seal`] made for `session_id`.
    pub fn open(
        keys: &SecretKeys,
        session_id: uuid::Uuid,
        sealed: &[u8],
    ) -> Result<SessionUpstream, SealError> {
        let plain = keys.open(sealed, &context(session_id))?;
        let mut headers = Vec::new();
        for line in plain.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let mut parts = line.splitn(2, |b| *b == 0);
            let (Some(n), Some(v)) = (parts.next(), parts.next()) else {
                return Err(SealError::Malformed);
            };
            let name = HeaderName::from_bytes(n).map_err(|_| SealError::Malformed)?;
            let mut value = HeaderValue::from_bytes(v).map_err(|_| SealError::Malformed)?;
            value.set_sensitive(true);
            headers.push((name, value));
        }
        Ok(SessionUpstream { headers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(pairs: &[(&str, &str)]) -> UpstreamInput {
        UpstreamInput {
            headers: pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn headers_are_checked() {
        let ok = input(&[("Authorization", "Bearer abc"), ("X-Tenant", "t1")])
            .check()
            .unwrap();
        assert_eq!(ok.names(), ["authorization", "x-tenant"]);
        for bad in [
            input(&[("Host", "evil")]),
            input(&[("Transfer-Encoding", "chunked")]),
            input(&[("Content-Type", "text/plain")]),
            input(&[("bad name", "x")]),
            input(&[("X-A", "line\r\nInjected: 1")]),
            input(&[("X-A", "")]),
            input(&[("X-A", "1"), ("x-a", "2")]),
            input(&[("X-A", &"v".repeat(MAX_HEADER_VALUE + 1))]),
        ] {
            let e = bad.check().unwrap_err();
            assert!(
                !e.contains("Bearer") && !e.contains("evil") && !e.contains("Injected"),
                "{e}"
            );
        }
        let many: Vec<(String, String)> = (0..=MAX_SESSION_HEADERS)
            .map(|i| (format!("x-{i}"), "v".into()))
            .collect();
        assert!(UpstreamInput { headers: many }.check().is_err());
    }

    #[test]
    fn deserialising_never_echoes_values() {
        let ok: UpstreamInput =
            serde_json::from_str(r#"{"headers": {"Authorization": "Bearer abc"}}"#).unwrap();
        assert_eq!(ok.headers, [("Authorization".into(), "Bearer abc".into())]);
        assert!(!format!("{ok:?}").contains("abc"));
        for bad in [
            r#""Bearer secret-1""#,
            r#"{"headers": "Bearer secret-1"}"#,
            r#"{"headers": {"A": ["secret-1"]}}"#,
            r#"{"headers": {}, "secret-1": 1}"#,
        ] {
            let e = serde_json::from_str::<UpstreamInput>(bad).unwrap_err();
            assert!(!e.to_string().contains("secret-1"), "{e}");
        }
    }

    #[test]
    fn cli_arguments_parse_without_echoing_values() {
        let a: HeaderArg = "Authorization: Bearer a:b".parse().unwrap();
        assert_eq!(
            (a.name.as_str(), a.value.as_str()),
            ("Authorization", "Bearer a:b")
        );
        assert!(!format!("{a:?}").contains("Bearer"));
        let e = "Bearer-secret-without-colon"
            .parse::<HeaderArg>()
            .unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        let input = UpstreamInput::from_args(&[a]);
        assert_eq!(input.check().unwrap().names(), ["authorization"]);
    }

    #[test]
    fn seal_and_open_for_one_session_only() {
        let keys = SecretKeys::from_bytes(&[3u8; 32], None).unwrap();
        let up = input(&[("Authorization", "Bearer abc"), ("Cookie", "a=1; b=2")])
            .check()
            .unwrap();
        let id = uuid::Uuid::new_v4();
        let sealed = up.seal(&keys, id).unwrap();
        let back = SessionUpstream::open(&keys, id, &sealed).unwrap();
        assert_eq!(back.headers(), up.headers());
        assert!(back.headers()[0].1.is_sensitive());
        assert!(SessionUpstream::open(&keys, uuid::Uuid::new_v4(), &sealed).is_err());
    }
}
