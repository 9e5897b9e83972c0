//! Credentials one call carries on top of the configured `--upstream-header`s: a session's
//! own upstream headers, a signed identity assertion, an OAuth token, a security scheme's
//! credential. The pipeline (`tools/`) fills a [`CallCredentials`] per call; [`super::Upstream::send`]
//! adds its headers last (they replace configured headers of the same name) and scrubs every
//! form of them from the response like the configured ones. Never shown in a dry run, a log
//! line or an error.

use http::{HeaderName, HeaderValue};

/// What one call adds, and where each part came from (for the audit row; never a value).
#[derive(Default, Clone)]
pub struct CallCredentials {
    headers: Vec<(HeaderName, HeaderValue)>,
    sources: Vec<String>,
}

impl std::fmt::Debug for CallCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("CallCredentials")
            .field("headers", &names)
            .field("sources", &self.sources)
            .finish()
    }
}

impl CallCredentials {
    /// Adds `name: value` for this call, replacing any configured or earlier header of that
    /// name; `source` names where it came from (`session`, `assertion`, `oauth`,
    /// `scheme:NAME`).
    pub fn set_header(&mut self, name: HeaderName, mut value: HeaderValue, source: &str) {
        value.set_sensitive(true);
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value));
        if !self.sources.iter().any(|s| s == source) {
            self.sources.push(source.to_string());
        }
    }

    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// Where this call's credentials came from, in the order they were added.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }
}
