//! OAuth 2.0 client credentials for the upstream (RFC 6749 §4.4): apigate fetches an access
//! token from `--upstream-oauth-token-url` with `client_secret_basic` and sends it as
//! `Authorization: Bearer …` on every call. The token is cached and refetched once it is
//! within min(60 s, 10 % of its lifetime) of `expires_in`; concurrent callers wait for one
//! fetch (single flight), and a failed fetch is the answer of everyone who waited for it. A
//! token the API rejects (401) is dropped so the next call fetches a fresh one; `send` retries
//! that call once. Neither the token nor the client secret is ever shown or logged: an error
//! answer shows its `error` only when it is one of RFC 6749 §5.2's codes, and its
//! `error_description` scrubbed of every form of the client credentials.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::HeaderValue;
use url::Url;

use super::config_error::ConfigError;
use super::redact::redact_str;

/// The token endpoint's answer is read up to this many bytes.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// RFC 6749 §5.2's error codes: the only `error` values shown.
const RFC6749_ERRORS: &[&str] = &[
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
];
/// The most of an `error_description` shown.
const MAX_DESCRIPTION_CHARS: usize = 200;
/// How long a token is used when the endpoint does not say (`expires_in` is optional).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// The most a token is refreshed ahead of its expiry.
const MAX_EARLY: Duration = Duration::from_secs(60);

/// `--upstream-oauth-*`.
#[derive(Clone)]
pub struct OAuthConfig {
    pub token_url: Url,
    pub client_id: String,
    /// Secret: never shown.
    pub client_secret: String,
    pub scope: Option<String>,
    pub audience: Option<String>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("token_url", &shown(&self.token_url))
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("scope", &self.scope)
            .field("audience", &self.audience)
            .finish()
    }
}

/// The token URL as messages show it: no user info, no query.
fn shown(url: &Url) -> String {
    redact_str(url.as_str())
}

impl OAuthConfig {
    /// Checks the token URL: http(s), no user info (the client id and secret have their own
    /// flags). A plain-http URL to a host other than loopback is allowed with a warning.
    pub fn new(
        token_url: &str,
        client_id: String,
        client_secret: String,
        scope: Option<String>,
        audience: Option<String>,
    ) -> Result<OAuthConfig, ConfigError> {
        let bad = |message: &str| ConfigError::OAuth(message.to_string());
        let url = Url::parse(token_url.trim())
            .map_err(|e| bad(&format!("--upstream-oauth-token-url is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
            return Err(bad(&format!(
                "--upstream-oauth-token-url {}: expected an http(s) URL",
                shown(&url)
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "--upstream-oauth-token-url has user info; give the client id and secret with \
                 --upstream-oauth-client-id and APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET instead",
            ));
        }
        if client_id.is_empty() || client_secret.is_empty() {
            return Err(bad(
                "OAuth client credentials need both --upstream-oauth-client-id and \
                 --upstream-oauth-client-secret (or APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET)",
            ));
        }
        let loopback = match url.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        };
        if url.scheme() == "http" && !loopback {
            tracing::warn!(url = %shown(&url), "the OAuth token URL is plain http: the client secret and the tokens cross the network unencrypted");
        }
        Ok(OAuthConfig {
            token_url: url,
            client_id,
            client_secret,
            scope: scope.filter(|s| !s.is_empty()),
            audience: audience.filter(|s| !s.is_empty()),
        })
    }

    /// `client_secret_basic` (RFC 6749 §2.3.1: each part form-urlencoded first).
    fn basic(&self) -> String {
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let pair = format!("{}:{}", enc(&self.client_id), enc(&self.client_secret));
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }

    /// The texts an upstream might echo (the secret and the Basic header of the token request).
    pub(crate) fn texts(&self) -> Vec<String> {
        let mut out = vec![self.client_secret.clone()];
        super::redact::value_texts(&self.basic(), &mut out);
        out
    }
}

/// Why no token could be had. Names the endpoint (without query or user info), never a
/// secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TokenError {
    #[error("the OAuth token endpoint {url} answered HTTP {status}{detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("the OAuth token endpoint {url} could not be reached: {message}")]
    Unreachable { url: String, message: String },
    #[error("the OAuth token endpoint {url} answered without a usable token: {message}")]
    BadAnswer { url: String, message: String },
}

/// A token in use.
pub struct Token {
    /// `Bearer …`, marked sensitive.
    pub header: HeaderValue,
    refresh_at: Instant,
}

/// The token source for one upstream; share it (every call uses the same token).
pub struct OAuth {
    cfg: OAuthConfig,
    client: reqwest::Client,
    current: RwLock<Option<Arc<Token>>>,
    /// Held while fetching: the single flight. Holds when the last fetch failed, and why.
    flight: tokio::sync::Mutex<Option<(Instant, TokenError)>>,
    fetches: std::sync::atomic::AtomicU64,
}

crate::debug_fields!(OAuth { cfg, .. });

impl OAuth {
    /// The token source; its client follows no redirect and uses the upstream's timeouts.
    pub fn new(
        cfg: OAuthConfig,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<OAuth, reqwest::Error> {
        let client = super::client_builder(connect_timeout, timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(OAuth {
            cfg,
            client,
            current: RwLock::new(None),
            flight: tokio::sync::Mutex::new(None),
            fetches: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// How many times a token was requested from the endpoint.
    pub fn fetches(&self) -> u64 {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn fresh(&self) -> Option<Arc<Token>> {
        let guard = self.current.read().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .filter(|t| Instant::now() < t.refresh_at)
            .cloned()
    }

    /// A token that is not due for refresh, fetched if needed (once for all who ask at the
    /// same time).
    pub async fn token(&self) -> Result<Arc<Token>, TokenError> {
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let asked = Instant::now();
        let mut flight = self.flight.lock().await;
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        // A fetch that failed while this caller waited is its answer too.
        if let Some((at, e)) = flight.as_ref()
            && *at >= asked
        {
            return Err(e.clone());
        }
        match self.fetch().await {
            Ok(t) => {
                let t = Arc::new(t);
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(t.clone());
                *flight = None;
                Ok(t)
            }
            Err(e) => {
                tracing::warn!(error = %e, "no OAuth token for the upstream");
                *flight = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    /// The API refused `token` (401): it is not used again.
    pub(crate) fn rejected(&self, token: &Arc<Token>) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, token)) {
            *current = None;
        }
    }

    /// What an error answer (RFC 6749 §5.2) may show of itself: its `error` only when it is
    /// one of the codes the RFC defines (anything else, the client secret included, is "an
    /// unrecognised error code"), and its `error_description` scrubbed of every form of the
    /// client credentials, control characters dropped, cut to [`MAX_DESCRIPTION_CHARS`].
    fn error_detail(&self, body: &serde_json::Value) -> String {
        let code = match body.get("error").and_then(serde_json::Value::as_str) {
            Some(c) if RFC6749_ERRORS.contains(&c) => c,
            Some(_) => "an unrecognised error code",
            None => return String::new(),
        };
        let description = body
            .get("error_description")
            .and_then(serde_json::Value::as_str)
            .and_then(|d| {
                // No matcher, no description: it is only shown scrubbed.
                let secrets = super::Secrets::new(self.cfg.texts()).ok()?;
                let clean: String = d
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                let mut clean = secrets.scrub_str(clean.trim()).into_owned();
                if clean.chars().count() > MAX_DESCRIPTION_CHARS {
                    clean = clean.chars().take(MAX_DESCRIPTION_CHARS).collect();
                    secrets.trim_partial_tail(&mut clean);
                    clean.push('…');
                }
                (!clean.is_empty()).then_some(clean)
            });
        match description {
            Some(d) => format!(" ({code}): {d}"),
            None => format!(" ({code})"),
        }
    }

    async fn fetch(&self) -> Result<Token, TokenError> {
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let url = shown(&self.cfg.token_url);
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if let Some(s) = &self.cfg.scope {
                form.append_pair("scope", s);
            }
            if let Some(a) = &self.cfg.audience {
                form.append_pair("audience", a);
            }
            form.finish()
        };
        let mut basic =
            HeaderValue::from_str(&self.cfg.basic()).map_err(|_| TokenError::BadAnswer {
                url: url.clone(),
                message: "the client id cannot be sent in a header".into(),
            })?;
        basic.set_sensitive(true);
        let started = Instant::now();
        let mut resp = self
            .client
            .post(self.cfg.token_url.clone())
            .header(http::header::AUTHORIZATION, basic)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| TokenError::Unreachable {
                url: url.clone(),
                message: crate::error_chain(&e.without_url()),
            })?;
        let status = resp.status();
        let (bytes, _) = super::response::read_limited(
            &mut resp,
            MAX_TOKEN_RESPONSE_BYTES,
            &mut super::CallBudget::unbounded(),
        )
        .await
        .map_err(|e| TokenError::Unreachable {
            url: url.clone(),
            message: crate::error_chain(&e.without_url()),
        })?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if !status.is_success() {
            return Err(TokenError::Status {
                url,
                status: status.as_u16(),
                detail: self.error_detail(&body),
            });
        }
        let bad = |message: &str| TokenError::BadAnswer {
            url: url.clone(),
            message: message.to_string(),
        };
        let token = body
            .get("access_token")
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| bad("no access_token in a JSON object"))?;
        if let Some(kind) = body.get("token_type").and_then(serde_json::Value::as_str)
            && !kind.eq_ignore_ascii_case("bearer")
        {
            return Err(bad("token_type is not Bearer"));
        }
        let lifetime = match body.get("expires_in") {
            Some(serde_json::Value::Number(n)) => n.as_f64(),
            Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
            _ => None,
        }
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(365.0 * 86_400.0)))
        .unwrap_or(DEFAULT_LIFETIME);
        let early = (lifetime / 10).min(MAX_EARLY);
        let mut header = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| bad("the access token is not a valid header value"))?;
        header.set_sensitive(true);
        tracing::info!(url = %url, expires_in_s = lifetime.as_secs_f64(), "fetched an OAuth token for the upstream");
        Ok(Token {
            header,
            // Measured from when the request went out: the endpoint counted from then at
            // the latest.
            refresh_at: started + lifetime - early,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_never_show_secrets() {
        let e = OAuthConfig::new(
            "https://id:sekrit-pass@idp.example/token?k=sekrit-q",
            "id".into(),
            "sekrit-secret".into(),
            None,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("user info"), "{e}");
        assert!(!e.contains("sekrit"), "{e}");
        let e = OAuthConfig::new(
            "ftp://idp/token?k=sekrit",
            "id".into(),
            "s".into(),
            None,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("http(s)") && !e.contains("sekrit"), "{e}");
        let c = OAuthConfig::new("https://idp/t", "a b".into(), "p:w&".into(), None, None).unwrap();
        // RFC 6749 §2.3.1: form-urlencoded before base64.
        assert_eq!(
            c.basic(),
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("a+b:p%3Aw%26")
            )
        );
        assert!(!format!("{c:?}").contains("p:w&"));
    }
}
