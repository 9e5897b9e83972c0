//! Building and sending the real HTTP request for `api_execute`: server URL, path
//! interpolation, allowed headers, injected credentials, timeouts, redirects, response budget.
//!
//! A request is built only from an indexed [`Operation`] and the spec's server (or the
//! configured `--upstream`); the client follows redirects only within the request's origin, so
//! no other host is ever contacted. Credentials live in [`UpstreamConfig`] and are added at
//! send time: a [`PreparedRequest`] (the dry-run view) never holds them, no error message or
//! log line shows them, and every form of them is scrubbed from responses ([`Secrets`]) before
//! a body is cut to the budget ([`shown_body`]). A binary answer is read whole up to
//! `--max-read-bytes` and handed on beside its description ([`BinaryBody`]). Imports `spec` and
//! `reqwest`; never axum, rmcp or tower.

mod binary;
mod body;
mod budget;
mod build;
mod config;
mod config_error;
mod credentials;
mod cut;
mod decode;
mod encode;
mod fit;
pub mod headers;
mod oauth;
mod redact;
mod response;
mod schemes;
pub mod upload;

use std::error::Error as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use url::Url;

use crate::spec::{Operation, Spec};
use crate::types::CredentialSource;

pub use binary::sha256_hex;
pub(crate) use body::choose_media;
pub use budget::{CallBudget, DEFAULT_MAX_BYTES_IN_FLIGHT, DEFAULT_MAX_CALL_BYTES, InFlight, Over};
pub(crate) use build::media_essence;
pub use build::{CallArgs, PreparedRequest, server_origins, server_url, server_urls};
pub use config::{
    ConfigError, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_READ_BYTES, MAX_READ_BYTES_CAP, UpstreamConfig,
};
pub use credentials::CallCredentials;
pub(crate) use encode::scalar;
pub use fit::{Cut, Fitted, fit};
pub(crate) use fit::{json_len, list_pointer};
pub use oauth::{OAuth, OAuthConfig, TokenError};
pub(crate) use redact::REDACTED;
pub use redact::{Secrets, SecretsError};
pub use response::{BinaryBody, Received, ShownBody, UpstreamResponse, shown_body, shown_response};
pub use schemes::{SchemeCredential, SchemeCredentials};

/// Why a call did not produce an upstream response. An upstream answering with an error
/// status (404, 500) is not an error here: it is an [`UpstreamResponse`] with `ok: false`.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The arguments cannot be turned into a safe request (missing path parameter, forbidden
    /// or undeclared header, path injection, body of the wrong shape).
    #[error("{0}")]
    InvalidArguments(String),
    /// No usable server URL: the operator must configure one (`--upstream`).
    #[error("{0}")]
    NoServer(String),
    /// The operation requires a header only configuration may set (`Authorization`, `Cookie`)
    /// and none is configured.
    #[error("{0}")]
    MissingCredential(String),
    #[error(
        "the upstream did not {} within {} ms; try again later, or ask the operator to raise the timeout",
        if *.connect { "accept the connection" } else { "answer" },
        .after.as_millis()
    )]
    Timeout { after: Duration, connect: bool },
    #[error("cannot connect to the upstream: {0}")]
    Connect(String),
    /// A redirect left the request's origin; it was not followed.
    #[error(
        "the upstream redirected to {to}, outside {origin}; apigate follows redirects only within the API's own origin"
    )]
    Redirect { to: String, origin: String },
    #[error("the upstream redirected more than {0} times")]
    TooManyRedirects(usize),
    #[error("upstream request failed: {0}")]
    Other(String),
    /// The configuration cannot be used (only when the client is built).
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Secrets(#[from] SecretsError),
    /// No OAuth token for the call: it was not sent.
    #[error("{0}; the call was not sent")]
    OAuth(#[from] TokenError),
}

/// A response as read, before it is fitted to the shown budget.
#[derive(Debug)]
pub struct Fetched {
    /// The body whole (up to `--max-read-bytes`) and scrubbed; `truncated` when the upstream
    /// sent more than that.
    pub response: UpstreamResponse,
    /// Every form of the credentials the call carried, for cutting the body later.
    pub secrets: Arc<Secrets>,
}

/// A redirect the policy refused because it leaves the origin.
#[derive(Debug)]
struct OffOrigin {
    to: Url,
    origin: Url,
}

impl std::fmt::Display for OffOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "redirect to another origin")
    }
}

impl std::error::Error for OffOrigin {}

#[derive(Debug)]
struct TooMany(usize);

impl std::fmt::Display for TooMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "too many redirects")
    }
}

impl std::error::Error for TooMany {}

/// The HTTP client for one upstream configuration; build once, share (cheap to clone).
#[derive(Clone)]
pub struct Upstream {
    client: reqwest::Client,
    /// The same client, following no redirect: for calls that carry an identity assertion,
    /// which is bound to the URL it was signed for (`htu`).
    no_redirect: reqwest::Client,
    cfg: Arc<UpstreamConfig>,
    /// The credentials, in every form, scrubbed from every response.
    secrets: Arc<Secrets>,
    /// Those plus a call's own credentials, by a digest of the latter: building the matcher
    /// costs far more than a call, and a session sends the same credentials on every call.
    with_call: moka::sync::Cache<[u8; 32], Arc<Secrets>>,
    /// The OAuth client-credentials token source (`--upstream-oauth-*`).
    oauth: Option<Arc<OAuth>>,
}

crate::debug_fields!(Upstream { cfg, .. });

impl Upstream {
    /// The client for `cfg`; user info in `cfg.base_url` becomes an `Authorization: Basic`
    /// header first ([`UpstreamConfig::with_user_info_as_header`]).
    pub fn new(cfg: UpstreamConfig) -> Result<Upstream, UpstreamError> {
        let had_user_info = cfg
            .base_url
            .as_ref()
            .is_some_and(|u| !u.username().is_empty() || u.password().is_some());
        let cfg = cfg.with_user_info_as_header()?;
        let oauth = match &cfg.oauth {
            Some(o) => {
                if cfg.is_credential("authorization") {
                    return Err(ConfigError::OAuthAndAuthorization(if had_user_info {
                        "the user info of --upstream"
                    } else {
                        "an --upstream-header"
                    })
                    .into());
                }
                let source =
                    OAuth::new(o.clone(), cfg.connect_timeout, cfg.timeout).map_err(|e| {
                        UpstreamError::Other(format!("cannot build the OAuth HTTP client: {e}"))
                    })?;
                Some(Arc::new(source))
            }
            None => None,
        };
        let max = cfg.max_redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            // `previous()` starts with the original URL.
            let Some(first) = attempt.previous().first().cloned() else {
                return attempt.stop();
            };
            if attempt.url().origin() != first.origin() {
                let to = attempt.url().clone();
                return attempt.error(OffOrigin { to, origin: first });
            }
            if attempt.previous().len() > max {
                return attempt.error(TooMany(max));
            }
            attempt.follow()
        });
        let build = |policy| {
            client_builder(cfg.connect_timeout, cfg.timeout)
                .redirect(policy)
                .build()
                .map_err(|e| UpstreamError::Other(format!("cannot build the HTTP client: {e}")))
        };
        let client = build(policy)?;
        let no_redirect = build(reqwest::redirect::Policy::none())?;
        Ok(Upstream {
            client,
            no_redirect,
            secrets: Arc::new(cfg.secrets()?),
            with_call: moka::sync::Cache::builder()
                .max_capacity(4096)
                .time_to_idle(Duration::from_secs(15 * 60))
                .build(),
            cfg: Arc::new(cfg),
            oauth,
        })
    }

    /// The OAuth token source, when client credentials are configured.
    pub fn oauth(&self) -> Option<&Arc<OAuth>> {
        self.oauth.as_ref()
    }

    /// Whether `other` sends the same configured credentials (headers, scheme credentials,
    /// OAuth client): compared by digest, so no secret is held twice or shown.
    pub fn same_credentials(&self, other: &Upstream) -> bool {
        crate::secrets_equal(&self.credentials_digest(), &other.credentials_digest())
    }

    fn credentials_digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let cfg = self.config();
        for (name, value) in &cfg.headers {
            h.update(name.as_str().as_bytes());
            h.update([0]);
            h.update(value.as_bytes());
            h.update([1]);
        }
        for (scheme, value) in cfg.schemes.values() {
            h.update(scheme.as_bytes());
            h.update([0]);
            h.update(value.as_bytes());
            h.update([2]);
        }
        if let Some(o) = &cfg.oauth {
            for part in [o.token_url.as_str(), &o.client_id, &o.client_secret] {
                h.update(part.as_bytes());
                h.update([3]);
            }
        }
        hex::encode(h.finalize())
    }

    pub fn config(&self) -> &UpstreamConfig {
        &self.cfg
    }

    /// Builds the request `op` with `args` would send (the dry run), without credentials.
    pub fn prepare(
        &self,
        spec: &Spec,
        op: &Operation,
        args: &CallArgs,
    ) -> Result<PreparedRequest, UpstreamError> {
        build::prepare(&self.cfg, spec, op, args)
    }

    /// Sends a prepared request with the configured credentials and `call`'s own, and reads
    /// the response within the body budget. With OAuth client credentials, a call that carries
    /// no `Authorization` of its own gets the token; if the API answers 401 to it, the token is
    /// dropped and the call is sent once more with a fresh one.
    pub async fn send(
        &self,
        req: &PreparedRequest,
        call: &CallCredentials,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let Fetched {
            mut response,
            secrets,
        } = self.fetch(req, call).await?;
        let fitted = fit::fit(
            std::mem::take(&mut response.body),
            self.cfg.max_body_bytes,
            !response.truncated,
            &secrets,
        );
        response.body = fitted.body;
        response.truncated = fitted.truncated;
        Ok(response)
    }

    /// [`Upstream::send`] without the shown budget: the body as read (up to
    /// `--max-read-bytes`, scrubbed, `truncated` when the upstream sent more), for `select`
    /// and [`fit::fit`] to shape, with the credentials it was scrubbed of.
    pub async fn fetch(
        &self,
        req: &PreparedRequest,
        call: &CallCredentials,
    ) -> Result<Fetched, UpstreamError> {
        self.fetch_within(req, call, &mut CallBudget::unbounded())
            .await
    }

    /// [`Upstream::fetch`] within a call's budget: the bytes read, decoded and parsed are
    /// taken from `budget`, and reading stops (the body cut, `truncated`) where it refuses
    /// more; `budget.over()` then says why.
    pub async fn fetch_within(
        &self,
        req: &PreparedRequest,
        call: &CallCredentials,
        budget: &mut CallBudget,
    ) -> Result<Fetched, UpstreamError> {
        let oauth = self
            .oauth
            .as_ref()
            .filter(|_| call.header(&http::header::AUTHORIZATION).is_none());
        let Some(oauth) = oauth else {
            return self.send_once(req, call, budget).await;
        };
        let token = oauth.token().await?;
        let response = self
            .send_once(req, &with_token(call, &token), budget)
            .await?;
        if response.response.status != 401 {
            return Ok(response);
        }
        oauth.rejected(&token);
        let token = oauth.token().await?;
        tracing::info!(method = %req.method, url = %redact::redact_url(&req.url),
            "the API refused the OAuth token (401); sending the call once more with a fresh one");
        self.send_once(req, &with_token(call, &token), budget).await
    }

    async fn send_once(
        &self,
        req: &PreparedRequest,
        call: &CallCredentials,
        budget: &mut CallBudget,
    ) -> Result<Fetched, UpstreamError> {
        let started = Instant::now();
        let mut headers = http::HeaderMap::new();
        for (n, v) in &req.headers {
            headers.append(n.clone(), v.clone());
        }
        for (n, v) in self
            .cfg
            .headers
            .iter()
            .map(|(n, v)| (n, v))
            .chain(call.headers())
        {
            headers.insert(n.clone(), v.clone());
        }
        // This call's own credentials are scrubbed like the configured ones.
        let secrets = self.secrets_with(call)?;
        // Query credentials go on the URL that is sent, never on the one shown or logged. A
        // parameter of the agent's with a credential's name would travel beside it
        // (`?api_key=ATTACKER&api_key=<secret>`), and an API may take either: refused.
        if let Some(name) = call.query().map(|(n, _)| n).find(|n| {
            req.url
                .query_pairs()
                .any(|(given, _)| given.eq_ignore_ascii_case(n))
        }) {
            return Err(UpstreamError::InvalidArguments(format!(
                "query: the query parameter {name:?} carries this API's credential, which the \
                 server adds; the call may not send a parameter of that name"
            )));
        }
        let mut url = req.url.clone();
        let mut query = call.query().peekable();
        if query.peek().is_some() {
            let mut pairs = url.query_pairs_mut();
            for (n, v) in query {
                pairs.append_pair(n, v);
            }
        }
        // An identity assertion names the URL it was signed for: a redirect would carry it
        // (and the user's credentials) to a URL it does not name, so the 3xx is the answer.
        let client = if call.sends_from(&CredentialSource::Assertion) {
            &self.no_redirect
        } else {
            &self.client
        };
        let mut builder = client.request(req.method.clone(), url).headers(headers);
        match &req.body {
            Some(b) => builder = builder.body(b.bytes.clone()),
            // A write with no body still says how long it is: some APIs (GitHub's "star a
            // repository") answer 411 Length Required otherwise.
            None if matches!(
                req.method,
                http::Method::POST | http::Method::PUT | http::Method::PATCH
            ) =>
            {
                builder = builder.header(http::header::CONTENT_LENGTH, "0");
            }
            None => {}
        }
        let shown_url = redact::redact_url(&req.url);
        let result = builder.send().await;
        let mut resp = match result {
            Ok(r) => r,
            Err(e) => {
                let err = self.map_error(e, &secrets);
                tracing::info!(method = %req.method, url = %shown_url, error = %err, "upstream call failed");
                return Err(err);
            }
        };
        let status = resp.status();
        let final_url = resp.url().clone();
        let mut safe_headers = response::safe_headers(resp.headers(), &final_url);
        let header = |name: http::header::HeaderName| {
            let values: Vec<&str> = resp
                .headers()
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            (!values.is_empty()).then(|| values.join(", "))
        };
        let content_type = header(http::header::CONTENT_TYPE);
        // The client never decompresses (no decompression feature): apigate decodes within
        // the budget.
        let content_encoding = header(http::header::CONTENT_ENCODING);
        // Read past the shown budget, so that `select` and a cut of whole items see the whole
        // body (what the agent is shown is fitted later), and a download comes back whole.
        let limit = self.cfg.max_read_bytes.max(self.cfg.max_body_bytes);
        let may_be_binary = binary::may_be_binary(content_type.as_deref());
        let (bytes, raw_truncated) = response::read_limited(&mut resp, limit, budget)
            .await
            .map_err(|e| self.map_error(e, &secrets))?;
        // Stop reading: dropping the response closes the connection if bytes are left.
        drop(resp);
        let raw_len = bytes.len();
        let received = response::Received {
            truncated: raw_truncated,
            content_type: content_type.as_deref(),
            content_encoding: content_encoding.as_deref(),
        };
        let (shown, binary) = if may_be_binary {
            let limits = binary::Limits {
                text: self.cfg.max_body_bytes,
                read: limit,
            };
            let c = binary::classify(bytes, received, &limits, &secrets);
            // What was decoded beyond the bytes read (already taken).
            let held = c.binary.as_ref().map_or(0, |b| b.bytes.len());
            if budget.take(held.saturating_sub(raw_len)).is_err() {
                budget.exhaust();
            }
            (c.shown, c.binary)
        } else {
            // Decoding and parsing take from what is left of the call's budget: a body that
            // would take more is cut (`budget.over()` says why).
            let encoded = content_encoding
                .as_deref()
                .is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
            // The decoded bytes and the parse's memory come out of what is left, taken now
            // (calls at once cannot each count on the same free bytes); what they did not use
            // goes back.
            let reserved = budget.reserve_left();
            let read = if encoded { limit.min(reserved) } else { limit };
            let room = reserved.saturating_sub(if encoded { read } else { 0 });
            let mut parse = response::ParseRoom::new(room);
            let shown = response::read_response(
                bytes,
                received,
                read,
                self.cfg.max_body_bytes,
                &secrets,
                &mut parse,
            );
            let used = parse.decoded.saturating_add(parse.cost);
            budget.give_back(reserved.saturating_sub(used));
            let decode_cut = encoded && parse.decoded >= read && read < limit;
            let unpaid = used > reserved && budget.take(used - reserved).is_err();
            if unpaid || parse.over || decode_cut {
                budget.exhaust();
            }
            (shown, None)
        };
        if shown.transformed {
            safe_headers.remove("content-length");
        }
        for v in safe_headers.values_mut() {
            secrets.redact_value(v);
        }
        let (body, truncated) = (shown.body, shown.truncated);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::debug!(method = %req.method, url = %shown_url, status = status.as_u16(),
            bytes = raw_len, truncated, duration_ms, "upstream call");
        Ok(Fetched {
            response: UpstreamResponse {
                status: status.as_u16(),
                ok: status.is_success(),
                headers: safe_headers,
                body,
                truncated,
                duration_ms: Some(duration_ms),
                binary,
            },
            secrets,
        })
    }

    /// The configured credentials' matcher, extended by the call's own credentials (built once
    /// per distinct set of them and kept while they are in use).
    fn secrets_with(&self, call: &CallCredentials) -> Result<Arc<Secrets>, UpstreamError> {
        if call.is_empty() {
            return Ok(self.secrets.clone());
        }
        let texts = call.texts();
        use sha2::Digest as _;
        let mut digest = sha2::Sha256::new();
        for t in &texts {
            digest.update((t.len() as u64).to_le_bytes());
            digest.update(t.as_bytes());
        }
        let key: [u8; 32] = digest.finalize().into();
        self.with_call
            .try_get_with(key, || self.secrets.with(&texts).map(Arc::new))
            .map_err(|e| UpstreamError::Other(e.to_string()))
    }

    /// Maps a client error to what the agent sees, without the URL (it may hold user info)
    /// and without any header.
    /// The redirect target is the API's choice: it is scrubbed like a response.
    fn map_error(&self, e: reqwest::Error, secrets: &Secrets) -> UpstreamError {
        let mut source = e.source();
        while let Some(s) = source {
            if let Some(o) = s.downcast_ref::<OffOrigin>() {
                return UpstreamError::Redirect {
                    to: secrets.scrub_str(&redact::redact_url(&o.to)).into_owned(),
                    origin: o.origin.origin().ascii_serialization(),
                };
            }
            if let Some(t) = s.downcast_ref::<TooMany>() {
                return UpstreamError::TooManyRedirects(t.0);
            }
            source = s.source();
        }
        if e.is_timeout() {
            let connect = e.is_connect();
            return UpstreamError::Timeout {
                after: if connect {
                    self.cfg.connect_timeout
                } else {
                    self.cfg.timeout
                },
                connect,
            };
        }
        let e = e.without_url();
        // The client's own words, but scrubbed like everything else the upstream may shape.
        let message = secrets.scrub_str(&crate::error_chain(&e)).into_owned();
        if e.is_connect() {
            UpstreamError::Connect(message)
        } else {
            UpstreamError::Other(message)
        }
    }
}

/// The client settings every upstream request shares (the API's and the OAuth token
/// endpoint's): timeouts, no `Referer`, apigate's `User-Agent`. Each sets its own redirects.
fn client_builder(connect_timeout: Duration, timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .timeout(timeout)
        .referer(false)
        .user_agent(concat!("apigate/", env!("CARGO_PKG_VERSION")))
}

/// `call` with the OAuth token as its `Authorization` header, first: anything `call` sets
/// itself stays.
fn with_token(call: &CallCredentials, token: &oauth::Token) -> CallCredentials {
    let mut out = CallCredentials::default();
    out.set_header(
        http::header::AUTHORIZATION,
        token.header.clone(),
        CredentialSource::OAuth,
    );
    out.extend(call);
    out
}
