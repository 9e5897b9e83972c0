//! Upstream configuration: the `--upstream` override, credential headers (from
//! `--upstream-header` or `APIGATE_UPSTREAM_HEADERS`), timeouts, redirect limit and response
//! budget. Credential values never appear in `Debug` output.

use std::fmt;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use url::Url;

/// Default response body budget (64 KiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024;
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default total timeout (connect, send, and reading the whole response).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of same-origin redirects followed.
pub const DEFAULT_MAX_REDIRECTS: usize = 5;

/// Hop-by-hop headers (RFC 9110 §7.6.1) plus the ones the HTTP client itself owns. Neither the
/// agent nor the configuration may set them.
pub(crate) const HOP_BY_HOP: [&str; 10] = [
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

/// Why a configuration value was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("upstream header {0:?}: expected \"Name: value\"")]
    HeaderSyntax(String),
    #[error("upstream header name {0:?} is not a valid HTTP header name")]
    HeaderName(String),
    #[error("the value of upstream header {0} is not a valid HTTP header value")]
    HeaderValue(String),
    #[error("upstream header {0} cannot be configured: the HTTP client sets it")]
    HeaderForbidden(String),
    #[error("APIGATE_UPSTREAM_HEADERS: {0}")]
    Env(String),
    #[error("--upstream {url:?}: {message}")]
    BaseUrl { url: String, message: String },
}

/// How `api_execute` reaches the upstream API.
#[derive(Clone)]
pub struct UpstreamConfig {
    /// `--upstream URL`: replaces the scheme, host and port of the spec's server. If it has a
    /// path of its own (other than `/`), that path also replaces the server's path; otherwise
    /// the server's path (OpenAPI `servers[].url` path or Swagger `basePath`) still applies.
    pub base_url: Option<Url>,
    /// Headers added to every upstream request (credentials). Secret: never shown.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub connect_timeout: Duration,
    /// Total time for one call: connecting, sending and reading the response.
    pub timeout: Duration,
    /// Response bodies beyond this many bytes are cut (JSON at a valid boundary).
    pub max_body_bytes: usize,
    /// Same-origin redirects followed before giving up.
    pub max_redirects: usize,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            base_url: None,
            headers: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_redirects: DEFAULT_MAX_REDIRECTS,
        }
    }
}

impl fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(n, _)| format!("{n}: [redacted]"))
            .collect();
        f.debug_struct("UpstreamConfig")
            .field("base_url", &self.base_url.as_ref().map(redact_url))
            .field("headers", &headers)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_redirects", &self.max_redirects)
            .finish()
    }
}

impl UpstreamConfig {
    /// The configuration from command-line values: `--upstream` (optional), each
    /// `--upstream-header`, and the `APIGATE_UPSTREAM_HEADERS` variable (its headers first, so
    /// a flag with the same name wins). Timeouts and budget keep their defaults; set the
    /// fields afterwards.
    pub fn from_flags(
        upstream: Option<&str>,
        header_flags: &[String],
        env_headers: Option<&str>,
    ) -> Result<UpstreamConfig, ConfigError> {
        let mut headers = match env_headers {
            Some(v) => Self::headers_from_env(v)?,
            None => Vec::new(),
        };
        for flag in header_flags {
            let (name, value) = Self::parse_header(flag)?;
            headers.retain(|(n, _)| n != name);
            headers.push((name, value));
        }
        Ok(UpstreamConfig {
            base_url: upstream.map(Self::parse_base_url).transpose()?,
            headers,
            ..Default::default()
        })
    }

    /// Parses an `--upstream` value: an absolute `http(s)` URL without query or fragment.
    pub fn parse_base_url(s: &str) -> Result<Url, ConfigError> {
        let err = |message: &str| ConfigError::BaseUrl {
            url: redact_str(s),
            message: message.to_string(),
        };
        let url = Url::parse(s.trim()).map_err(|e| err(&format!("not an absolute URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(err("only http and https are supported"));
        }
        if url.host_str().is_none() {
            return Err(err("no host"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(err("must not have a query or fragment"));
        }
        Ok(url)
    }

    /// Parses one `--upstream-header` value, `"Name: value"`. The value is marked sensitive.
    pub fn parse_header(s: &str) -> Result<(HeaderName, HeaderValue), ConfigError> {
        let Some((name, value)) = s.split_once(':') else {
            // Never echo the whole argument: it may be a bare secret.
            return Err(ConfigError::HeaderSyntax(
                s.chars().take(20).collect::<String>() + "…",
            ));
        };
        let name = name.trim();
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConfigError::HeaderName(name.to_string()))?;
        if HOP_BY_HOP.contains(&header.as_str()) {
            return Err(ConfigError::HeaderForbidden(header.to_string()));
        }
        let mut value = HeaderValue::from_str(value.trim())
            .map_err(|_| ConfigError::HeaderValue(header.to_string()))?;
        value.set_sensitive(true);
        Ok((header, value))
    }

    /// Parses `APIGATE_UPSTREAM_HEADERS`: one `Name: value` per line (blank lines and lines
    /// starting with `#` are skipped), or a JSON object `{"Name": "value", …}`. Lines, not `;`,
    /// separate headers because `;` occurs inside values (`Cookie: a=1; b=2`).
    pub fn headers_from_env(value: &str) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
        let trimmed = value.trim();
        if trimmed.starts_with('{') {
            let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(trimmed)
                .map_err(|e| ConfigError::Env(format!("not a JSON object of strings: {e}")))?;
            return map
                .iter()
                .map(|(k, v)| match v.as_str() {
                    Some(v) => Self::parse_header(&format!("{k}: {v}")),
                    None => Err(ConfigError::Env(format!(
                        "the value of {k} is not a string"
                    ))),
                })
                .collect();
        }
        trimmed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(Self::parse_header)
            .collect()
    }

    /// The secret strings an upstream might echo back (a header value, the token after
    /// `Bearer `, a URL password), longest first; values shorter than 8 characters are not
    /// treated as secrets (redacting them would mangle ordinary text).
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (_, v) in &self.headers {
            let Ok(s) = v.to_str() else { continue };
            let s = s.trim();
            out.push(s.to_string());
            if let Some((_, token)) = s.split_once(' ') {
                out.push(token.trim().to_string());
            }
        }
        if let Some(p) = self.base_url.as_ref().and_then(Url::password) {
            out.push(p.to_string());
            let decoded = percent_encoding::percent_decode_str(p).decode_utf8_lossy();
            out.push(decoded.into_owned());
        }
        out.retain(|s| s.len() >= 8);
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out.dedup();
        out
    }

    /// Whether `name` is one of the configured credential headers.
    pub(crate) fn is_credential(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
    }
}

/// A URL as it may be shown: user name and password removed.
pub(crate) fn redact_url(url: &Url) -> String {
    let mut shown = url.clone();
    if !shown.username().is_empty() || shown.password().is_some() {
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
    }
    shown.to_string()
}

fn redact_str(s: &str) -> String {
    match Url::parse(s) {
        Ok(u) => redact_url(&u),
        Err(_) => "[unparsable URL]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_and_stay_secret() {
        let (n, v) = UpstreamConfig::parse_header("Authorization: Bearer sk_live_x").unwrap();
        assert_eq!(n.as_str(), "authorization");
        assert_eq!(v.to_str().unwrap(), "Bearer sk_live_x");
        assert!(v.is_sensitive());
        let cfg = UpstreamConfig {
            headers: vec![(n, v)],
            base_url: Some(Url::parse("https://user:pw@api.example.com/v1").unwrap()),
            ..Default::default()
        };
        let shown = format!("{cfg:?}");
        assert!(!shown.contains("sk_live_x"), "{shown}");
        assert!(!shown.contains("pw"), "{shown}");
        assert!(shown.contains("authorization: [redacted]"));
        assert!(cfg.is_credential("AUTHORIZATION"));
        assert_eq!(cfg.secrets(), ["Bearer sk_live_x", "sk_live_x"]);
    }

    #[test]
    fn bad_headers_are_refused_without_echoing_secrets() {
        let e = UpstreamConfig::parse_header("sk_live_abcdefghijklmnopqrstuvwxyz").unwrap_err();
        assert!(!e.to_string().contains("uvwxyz"));
        assert!(matches!(
            UpstreamConfig::parse_header("Host: evil.example"),
            Err(ConfigError::HeaderForbidden(_))
        ));
        assert!(matches!(
            UpstreamConfig::parse_header("Bad Name: x"),
            Err(ConfigError::HeaderName(_))
        ));
    }

    #[test]
    fn env_accepts_lines_and_json() {
        let h = UpstreamConfig::headers_from_env(
            "Authorization: Bearer a\n# comment\n\nCookie: a=1; b=2\n",
        )
        .unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].1.to_str().unwrap(), "a=1; b=2");
        let h =
            UpstreamConfig::headers_from_env(r#"{"X-Api-Key": "k1", "Stripe-Version": "2024"}"#)
                .unwrap();
        assert_eq!(h.len(), 2);
        assert!(UpstreamConfig::headers_from_env(r#"{"X": 1}"#).is_err());
    }

    #[test]
    fn flags_override_the_environment() {
        let cfg = UpstreamConfig::from_flags(
            Some("http://localhost:8080"),
            &["Authorization: Bearer flag".to_string()],
            Some("Authorization: Bearer env\nX-Org: 1"),
        )
        .unwrap();
        assert_eq!(cfg.headers.len(), 2);
        assert_eq!(cfg.headers[1].1.to_str().unwrap(), "Bearer flag");
        assert!(UpstreamConfig::from_flags(Some("nope"), &[], None).is_err());
    }

    #[test]
    fn base_url_must_be_http() {
        assert!(UpstreamConfig::parse_base_url("http://127.0.0.1:8080").is_ok());
        assert!(UpstreamConfig::parse_base_url("ftp://x").is_err());
        assert!(UpstreamConfig::parse_base_url("/relative").is_err());
        assert!(UpstreamConfig::parse_base_url("https://x/?a=1").is_err());
    }
}
