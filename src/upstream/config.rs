//! Upstream configuration: the `--upstream` override, credential headers (from
//! `--upstream-header` or `APIGATE_UPSTREAM_HEADERS`), timeouts, redirect limit and response
//! budget. Credential values never appear in `Debug` output or in an error message.
//!
//! User info in `--upstream` (`http://user:password@host`) is a credential like any other: it
//! becomes the `Authorization: Basic …` header (see [`UpstreamConfig::with_user_info_as_header`])
//! and never stays in a URL, so it is redacted from dry runs and responses in all its forms.

use std::fmt;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use url::Url;

pub use super::config_error::ConfigError;
use super::redact::{Secrets, SecretsError, credential_texts, redact_str, redact_url};

/// Default response body budget (40 KiB): a whole result, with its headers and `next`, stays
/// under what Claude Code (50,000 characters) and OpenCode (51,200 bytes, or nothing at all for
/// a one-line result) put in front of the model (docs/responses.md).
pub const DEFAULT_MAX_BODY_BYTES: usize = 40 * 1024;
/// Default read budget (16 MiB): how much of a response is read, for `select` and a cut of
/// whole items before the shown budget applies, and for a binary download returned whole.
pub const DEFAULT_MAX_READ_BYTES: usize = 16 * 1024 * 1024;

/// The most `--max-read-bytes` may be (1 GiB), and the unit of the caps of the flags that
/// derive from it.
pub const MAX_READ_BYTES_CAP: u64 = 1 << 30;
/// Default connect timeout.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default total timeout (connect, send, and reading the whole response).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of same-origin redirects followed.
pub(crate) const DEFAULT_MAX_REDIRECTS: usize = 5;

/// How `api_execute` reaches the upstream API.
#[derive(Clone)]
pub struct UpstreamConfig {
    /// `--upstream URL`: replaces the scheme, host and port of the spec's server. If it has a
    /// path of its own (other than `/`), that path also replaces the server's path; otherwise
    /// the server's path (OpenAPI `servers[].url` path or Swagger `basePath`) still applies.
    /// Its user info, if any, is moved into an `Authorization: Basic …` header by
    /// [`UpstreamConfig::with_user_info_as_header`] before any request is built.
    pub base_url: Option<Url>,
    /// Headers added to every upstream request (credentials). Secret: never shown.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub connect_timeout: Duration,
    /// Total time for one call: connecting, sending and reading the response.
    pub timeout: Duration,
    /// Response bodies beyond this many bytes are cut (JSON at a valid boundary).
    pub max_body_bytes: usize,
    /// Response bodies are read up to this many bytes (`--max-read-bytes`), so that `select`
    /// and a cut of whole items see more than the shown budget (beyond it a text body is cut on
    /// reading: a valid JSON prefix); a binary response (not text by type and content) is read
    /// up to this many bytes and handed on whole, or described, never passed on in part.
    pub max_read_bytes: usize,
    /// Same-origin redirects followed before giving up.
    pub max_redirects: usize,
    /// OAuth client credentials (`--upstream-oauth-*`): a token on every call.
    pub oauth: Option<super::oauth::OAuthConfig>,
    /// Credentials by security scheme (`--upstream-credential`), on the operations that need
    /// them.
    pub schemes: super::schemes::SchemeCredentials,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            base_url: None,
            headers: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            oauth: None,
            schemes: super::schemes::SchemeCredentials::default(),
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
            .field("max_read_bytes", &self.max_read_bytes)
            .field("max_redirects", &self.max_redirects)
            .field("oauth", &self.oauth)
            .field("schemes", &self.schemes)
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
        UpstreamConfig {
            base_url: upstream.map(Self::parse_base_url).transpose()?,
            headers,
            ..Default::default()
        }
        .with_user_info_as_header()
    }

    /// Moves user info out of `--upstream` into an `Authorization: Basic base64(user:password)`
    /// header (user and password percent-decoded, as HTTP clients do), so the URL no longer
    /// holds a credential and the header is treated like any configured one. Refused when an
    /// `Authorization` header is configured as well. Idempotent.
    pub(crate) fn with_user_info_as_header(mut self) -> Result<UpstreamConfig, ConfigError> {
        use base64::Engine as _;
        let Some(url) = self.base_url.as_mut() else {
            return Ok(self);
        };
        if url.username().is_empty() && url.password().is_none() {
            return Ok(self);
        }
        let shown = redact_url(url);
        if self
            .headers
            .iter()
            .any(|(n, _)| n == http::header::AUTHORIZATION)
        {
            return Err(ConfigError::UserInfoAndAuthorization { url: shown });
        }
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|d| d.into_owned())
                .map_err(|_| ConfigError::UserInfoEncoding { url: shown.clone() })
        };
        let user = decode(url.username())?;
        let password = decode(url.password().unwrap_or_default())?;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut value = HeaderValue::from_str(&format!("Basic {token}"))
            .map_err(|_| ConfigError::UserInfoEncoding { url: shown.clone() })?;
        value.set_sensitive(true);
        // Removing user info from an http(s) URL cannot fail.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        self.headers.push((http::header::AUTHORIZATION, value));
        Ok(self)
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
        if !super::headers::operator_may_set(header.as_str()) {
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

    /// The credentials an upstream might echo back, as [`Secrets`] (every encoded form):
    /// each header value, the token after its scheme (`Bearer …`), the `user:password` and
    /// password inside a Basic credential, and the user info of a `base_url` that was not
    /// moved into a header.
    pub fn secrets(&self) -> Result<Secrets, SecretsError> {
        use base64::Engine as _;
        let mut out = credential_texts(self.headers.iter().map(|(_, v)| v));
        if let Some(url) = &self.base_url
            && let Some(password) = url.password()
        {
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            };
            let user_pass = format!("{}:{}", decode(url.username()), decode(password));
            let token = base64::engine::general_purpose::STANDARD.encode(&user_pass);
            out.push(format!("Basic {token}"));
            out.push(token);
            out.push(password.to_string());
            super::redact::basic(user_pass, &mut out);
        }
        if let Some(o) = &self.oauth {
            out.extend(o.texts());
        }
        for c in self.schemes.iter() {
            out.extend(c.texts());
        }
        Secrets::new(out)
    }

    /// Whether `name` is one of the configured credential headers.
    pub(crate) fn is_credential(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::redact::assert_forms;

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
        let secrets = cfg.secrets().unwrap();
        assert_forms(
            &secrets,
            &[
                "Bearer sk_live_x",
                "sk_live_x",
                "Bearer%20sk_live_x",
                "Bearer+sk_live_x",
                // base64("user:pw"): user info left in the URL is a credential too.
                "Basic dXNlcjpwdw==",
                "dXNlcjpwdw%3D%3D",
            ],
        );
        // Too short to be redacted without mangling ordinary text.
        assert!(!secrets.forms().iter().any(|f| f == "user:pw"));
    }

    #[test]
    fn user_info_becomes_a_basic_header() {
        let cfg = UpstreamConfig::from_flags(
            Some("http://api%40user:p%40ss-w0rd@api.example.com/v1"),
            &["X-Org: 12".to_string()],
            None,
        )
        .unwrap();
        let url = cfg.base_url.as_ref().unwrap();
        assert_eq!(url.as_str(), "http://api.example.com/v1");
        let (name, value) = cfg.headers.last().unwrap();
        assert_eq!(name, http::header::AUTHORIZATION);
        // base64("api@user:p@ss-w0rd"), as reqwest would have sent it.
        assert_eq!(value.to_str().unwrap(), "Basic YXBpQHVzZXI6cEBzcy13MHJk");
        assert!(value.is_sensitive());
        let secrets = cfg.secrets().unwrap();
        assert_forms(
            &secrets,
            &[
                "Basic YXBpQHVzZXI6cEBzcy13MHJk",
                "YXBpQHVzZXI6cEBzcy13MHJk",
                "api@user:p@ss-w0rd",
                "p@ss-w0rd",
                "p%40ss-w0rd",
            ],
        );
        // Moving it again changes nothing.
        let again = cfg.clone().with_user_info_as_header().unwrap();
        assert_eq!(again.headers.len(), cfg.headers.len());

        let e = UpstreamConfig::from_flags(
            Some("http://user:hunter2hunter2@api.example.com"),
            &["Authorization: Bearer x".to_string()],
            None,
        )
        .unwrap_err();
        assert!(
            matches!(e, ConfigError::UserInfoAndAuthorization { .. }),
            "{e}"
        );
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn a_bad_upstream_is_reported_without_its_credentials() {
        for bad in [
            "http://user:hunter2hunter2@api.example.com:99999/v1",
            "ftp://user:hunter2hunter2@api.example.com",
            "https://user:hunter2hunter2@api.example.com/?token=hunter2hunter2",
            "http://user:hunter2hunter2@exa mple.com/",
            "user:hunter2hunter2@api.example.com",
        ] {
            let e = UpstreamConfig::parse_base_url(bad).unwrap_err().to_string();
            assert!(!e.contains("hunter2"), "{e}");
            assert!(
                e.contains("api.example.com") || e.contains("exa mple"),
                "{e}"
            );
        }
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
