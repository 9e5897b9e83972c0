//! Credentials one call carries on top of the configured `--upstream-header`s: the OAuth
//! token, a security scheme's credential, a session's own upstream headers, a signed identity
//! assertion. The pipeline (`tools/`) fills a [`CallCredentials`] per call, in that order, a
//! later header replacing an earlier one of the same name; [`super::Upstream::send`] adds its
//! headers last (they replace configured headers of the same name), appends its query
//! parameters to the URL it sends (never to the URL it shows or logs) and scrubs every form of
//! them from the response like the configured ones. Never shown in a dry run, a log line or an
//! error.

use http::{HeaderName, HeaderValue};

use crate::types::CredentialSource;

/// What one call adds, and where each part came from (for the audit row; never a value).
#[derive(Default, Clone)]
pub struct CallCredentials {
    headers: Vec<(HeaderName, HeaderValue, CredentialSource)>,
    /// Query parameters (an `apiKey` scheme `in: query`): name, value, source.
    query: Vec<(String, String, CredentialSource)>,
    /// Every source in the order it was first added.
    order: Vec<CredentialSource>,
}

impl std::fmt::Debug for CallCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(n, ..)| n.as_str()).collect();
        let query: Vec<&str> = self.query.iter().map(|(n, ..)| n.as_str()).collect();
        f.debug_struct("CallCredentials")
            .field("headers", &headers)
            .field("query", &query)
            .field("sources", &self.sources())
            .finish()
    }
}

impl CallCredentials {
    /// Adds `name: value` for this call, replacing any configured or earlier header of that
    /// name; `source` says where it came from.
    pub fn set_header(
        &mut self,
        name: HeaderName,
        mut value: HeaderValue,
        source: CredentialSource,
    ) {
        value.set_sensitive(true);
        self.headers.retain(|(n, ..)| *n != name);
        self.added(&source);
        self.headers.push((name, value, source));
    }

    fn added(&mut self, source: &CredentialSource) {
        if !self.order.contains(source) {
            self.order.push(source.clone());
        }
    }

    /// Adds the query parameter `name=value` to the URL this call is sent to, replacing an
    /// earlier credential of that name.
    pub(crate) fn set_query(&mut self, name: &str, value: &str, source: CredentialSource) {
        self.query.retain(|(n, ..)| n != name);
        self.added(&source);
        self.query
            .push((name.to_string(), value.to_string(), source));
    }

    /// Adds everything `other` carries, replacing what this holds of the same names.
    pub fn extend(&mut self, other: &CallCredentials) {
        for (n, v, s) in &other.headers {
            self.set_header(n.clone(), v.clone(), s.clone());
        }
        for (n, v, s) in &other.query {
            self.set_query(n, v, s.clone());
        }
    }

    pub fn headers(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        self.headers.iter().map(|(n, v, _)| (n, v))
    }

    pub fn query(&self) -> impl Iterator<Item = (&str, &str)> {
        self.query.iter().map(|(n, v, _)| (n.as_str(), v.as_str()))
    }

    /// The header `name`, and where it came from.
    pub fn header(&self, name: &HeaderName) -> Option<(&HeaderValue, &CredentialSource)> {
        self.headers
            .iter()
            .find(|(n, ..)| n == name)
            .map(|(_, v, s)| (v, s))
    }

    /// Where the credentials this call sends came from, in the order they were added (a
    /// source whose every header was replaced later is not listed).
    pub(crate) fn sources(&self) -> Vec<CredentialSource> {
        let sent = |source: &CredentialSource| {
            self.headers.iter().any(|(.., s)| s == source)
                || self.query.iter().any(|(.., s)| s == source)
        };
        self.order.iter().filter(|s| sent(s)).cloned().collect()
    }

    /// Every credential text this call sends (header values and query values), for the
    /// response scrubber.
    pub(crate) fn texts(&self) -> Vec<String> {
        let mut out = super::redact::credential_texts(self.headers.iter().map(|(_, v, _)| v));
        out.extend(self.query.iter().map(|(_, v, _)| v.clone()));
        out
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty() && self.query.is_empty()
    }

    /// Whether a header from `source` is sent.
    pub(crate) fn sends_from(&self, source: &CredentialSource) -> bool {
        self.headers.iter().any(|(.., s)| s == source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_header_drops_its_source() {
        let mut c = CallCredentials::default();
        let auth = http::header::AUTHORIZATION;
        let scheme = CredentialSource::Scheme("api_key".into());
        c.set_header(
            auth.clone(),
            HeaderValue::from_static("Bearer a"),
            CredentialSource::OAuth,
        );
        c.set_header(
            auth.clone(),
            HeaderValue::from_static("Bearer b"),
            CredentialSource::Session,
        );
        c.set_query("api_key", "k", scheme.clone());
        assert_eq!(c.sources(), [CredentialSource::Session, scheme]);
        assert_eq!(
            c.header(&auth).map(|(_, s)| s),
            Some(&CredentialSource::Session)
        );
        assert!(c.header(&auth).is_some_and(|(v, _)| v.is_sensitive()));
        assert_eq!(c.texts(), ["Bearer b", "b", "k"]);
    }
}
