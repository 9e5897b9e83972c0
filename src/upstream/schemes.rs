//! Credentials by security scheme (`--upstream-credential SCHEME=VALUE`): each is placed where
//! the spec's `securitySchemes.SCHEME` says (`apiKey` in a header, the query or a cookie;
//! `http` bearer or basic; `oauth2`/`openIdConnect` as a bearer token), and only on operations
//! whose `security` requires that scheme: the first alternative of the requirement whose every
//! scheme has a credential is the one sent. Values are secrets like `--upstream-header`s.

use base64::Engine as _;
use http::{HeaderName, HeaderValue};

use super::config_error::ConfigError;
use super::credentials::CallCredentials;
use crate::spec::{KeyIn, SchemeKind};
use crate::types::CredentialSource;

/// One configured scheme credential, resolved against the spec.
#[derive(Clone)]
pub struct SchemeCredential {
    pub scheme: String,
    place: Place,
    /// The value as configured (secret).
    value: String,
}

#[derive(Clone)]
enum Place {
    Header(HeaderName, HeaderValue),
    Query(String),
    Cookie(String),
}

impl std::fmt::Debug for SchemeCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match &self.place {
            Place::Header(n, _) => format!("header {n}"),
            Place::Query(n) => format!("query {n}"),
            Place::Cookie(n) => format!("cookie {n}"),
        };
        write!(
            f,
            "SchemeCredential({} in {place}, [redacted])",
            self.scheme
        )
    }
}

impl SchemeCredential {
    /// Reads `SCHEME=VALUE`, where `VALUE` may be `env:VAR` (the variable's value), and places
    /// it as the spec's scheme of that name says. Errors never show the value.
    pub fn parse(
        arg: &str,
        schemes: &std::collections::BTreeMap<String, SchemeKind>,
    ) -> Result<SchemeCredential, ConfigError> {
        let bad = |message: String| ConfigError::SchemeCredential(message);
        let Some((scheme, value)) = arg.split_once('=') else {
            return Err(bad(format!(
                "expected SCHEME=VALUE (or SCHEME=env:VAR), got {} characters without '='",
                arg.chars().count()
            )));
        };
        let scheme = scheme.trim();
        let value = match value.strip_prefix("env:") {
            Some(var) => std::env::var(var).map_err(|_| {
                bad(format!(
                    "{scheme}: the environment variable {var} is not set (or not UTF-8)"
                ))
            })?,
            None => value.to_string(),
        };
        let value = value.trim().to_string();
        if value.is_empty() {
            return Err(bad(format!("{scheme}: the value is empty")));
        }
        let Some(kind) = schemes.get(scheme) else {
            let known: Vec<&str> = schemes.keys().map(String::as_str).collect();
            return Err(bad(format!(
                "the spec has no security scheme {scheme:?}; it has {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        let header = |name: HeaderName, text: String| -> Result<Place, ConfigError> {
            let mut v = HeaderValue::from_str(&text).map_err(|_| {
                bad(format!(
                    "{scheme}: the value is not a valid HTTP header value"
                ))
            })?;
            v.set_sensitive(true);
            Ok(Place::Header(name, v))
        };
        let place = match kind {
            SchemeKind::ApiKey {
                location: KeyIn::Header,
                name,
            } => {
                let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    bad(format!(
                        "{scheme}: the spec's header name {name:?} is not a valid HTTP header name"
                    ))
                })?;
                if !super::headers::operator_may_set(n.as_str()) {
                    return Err(bad(format!(
                        "{scheme}: the spec puts it in the {n} header, which the HTTP client sets"
                    )));
                }
                header(n, value.clone())?
            }
            SchemeKind::ApiKey {
                location: KeyIn::Query,
                name,
            } => Place::Query(name.clone()),
            SchemeKind::ApiKey {
                location: KeyIn::Cookie,
                name,
            } => Place::Cookie(name.clone()),
            SchemeKind::Bearer | SchemeKind::OAuth2 => {
                header(http::header::AUTHORIZATION, format!("Bearer {value}"))?
            }
            SchemeKind::Basic => {
                if !value.contains(':') {
                    return Err(bad(format!(
                        "{scheme} is HTTP Basic: give the value as user:password"
                    )));
                }
                let token = base64::engine::general_purpose::STANDARD.encode(&value);
                header(http::header::AUTHORIZATION, format!("Basic {token}"))?
            }
            SchemeKind::Other(d) => {
                return Err(bad(format!(
                    "{scheme} is a {d} scheme, which apigate cannot supply; it supplies apiKey, \
                     http bearer or basic, oauth2 and openIdConnect (as a bearer token)"
                )));
            }
        };
        Ok(SchemeCredential {
            scheme: scheme.to_string(),
            place,
            value,
        })
    }

    /// The texts an upstream might echo back (scrubbed from responses).
    pub(crate) fn texts(&self) -> Vec<String> {
        let mut out = vec![self.value.clone()];
        match &self.place {
            Place::Header(_, v) => out.extend(super::redact::credential_texts([v])),
            Place::Query(n) | Place::Cookie(n) => out.push(format!("{n}={}", self.value)),
        }
        out
    }
}

/// The configured scheme credentials.
#[derive(Debug, Clone, Default)]
pub struct SchemeCredentials(Vec<SchemeCredential>);

impl SchemeCredentials {
    pub fn new(list: Vec<SchemeCredential>) -> SchemeCredentials {
        SchemeCredentials(list)
    }

    /// Each scheme with its configured value (secret), for comparing configurations.
    pub(crate) fn values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|c| (c.scheme.as_str(), c.value.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, scheme: &str) -> Option<&SchemeCredential> {
        self.0.iter().find(|c| c.scheme == scheme)
    }

    pub fn iter(&self) -> impl Iterator<Item = &SchemeCredential> {
        self.0.iter()
    }

    /// The alternative of `requirement` apigate sends: the first non-empty one whose every
    /// scheme has a credential. `None` when no alternative can be supplied.
    pub fn chosen<'a>(&'a self, requirement: &[Vec<String>]) -> Option<Vec<&'a SchemeCredential>> {
        requirement
            .iter()
            .filter(|alt| !alt.is_empty())
            .find_map(|alt| alt.iter().map(|s| self.get(s)).collect::<Option<Vec<_>>>())
    }

    /// Adds the credentials `requirement` asks for to `call` (sources `scheme:NAME`).
    pub fn apply(&self, requirement: &[Vec<String>], call: &mut CallCredentials) {
        let Some(chosen) = self.chosen(requirement) else {
            return;
        };
        let mut cookies: Vec<String> = Vec::new();
        let mut cookie_source = None;
        for c in chosen {
            let source = CredentialSource::Scheme(c.scheme.clone());
            match &c.place {
                Place::Header(n, v) => call.set_header(n.clone(), v.clone(), source),
                Place::Query(n) => call.set_query(n, &c.value, source),
                Place::Cookie(n) => {
                    cookies.push(format!("{n}={}", c.value));
                    cookie_source.get_or_insert(source);
                }
            }
        }
        if let Some(source) = cookie_source
            && let Ok(v) = HeaderValue::from_str(&cookies.join("; "))
        {
            call.set_header(http::header::COOKIE, v, source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn schemes() -> BTreeMap<String, SchemeKind> {
        let mut m = BTreeMap::new();
        m.insert(
            "key".to_string(),
            SchemeKind::ApiKey {
                location: KeyIn::Query,
                name: "api_key".into(),
            },
        );
        m.insert("basic".to_string(), SchemeKind::Basic);
        m.insert(
            "sid".to_string(),
            SchemeKind::ApiKey {
                location: KeyIn::Cookie,
                name: "sid".into(),
            },
        );
        m.insert("tls".to_string(), SchemeKind::Other("mutualTLS".into()));
        m
    }

    #[test]
    fn errors_name_the_scheme_never_the_value() {
        let s = schemes();
        for (arg, says) in [
            ("nope=sekrit-value", "no security scheme \"nope\""),
            ("basic=sekrit-value", "user:password"),
            ("tls=sekrit-value", "cannot supply"),
            ("sekrit-value", "without '='"),
            ("key=env:APIGATE_TEST_UNSET_VARIABLE", "is not set"),
        ] {
            let e = SchemeCredential::parse(arg, &s).unwrap_err().to_string();
            assert!(e.contains(says), "{arg}: {e}");
            assert!(!e.contains("sekrit"), "{e}");
        }
    }

    #[test]
    fn the_first_supplied_alternative_is_sent() {
        let s = schemes();
        let creds = SchemeCredentials::new(vec![
            SchemeCredential::parse("key=k-123456789", &s).unwrap(),
            SchemeCredential::parse("sid=s-123456789", &s).unwrap(),
        ]);
        let req = vec![
            vec!["basic".to_string()],
            vec!["key".to_string(), "sid".to_string()],
        ];
        let mut call = CallCredentials::default();
        creds.apply(&req, &mut call);
        assert_eq!(
            call.query().collect::<Vec<_>>(),
            [("api_key", "k-123456789")]
        );
        let (cookie, source) = call.header(&http::header::COOKIE).unwrap();
        assert_eq!(cookie.to_str().unwrap(), "sid=s-123456789");
        let scheme = |name: &str| CredentialSource::Scheme(name.into());
        assert_eq!(source, &scheme("sid"));
        assert_eq!(call.sources(), [scheme("key"), scheme("sid")]);
        // Nothing when no alternative is complete, or none is needed.
        for req in [vec![vec!["basic".to_string()]], vec![vec![]], vec![]] {
            let mut call = CallCredentials::default();
            creds.apply(&req, &mut call);
            assert!(call.is_empty());
        }
    }
}
